package dockerhost

import (
	"fmt"
	"time"
)

// Why an execution ended: Error.Reason of a gone answer (and of a
// provision refused for naming an ended id), kept with the ended id as
// long as the id is remembered (the last 4096 in memory, and with
// Config.Tombstones across restarts).
const (
	// EndTerminated: a Terminate (DELETE /v1/executions/{id}).
	EndTerminated = "terminated"
	// EndTimeout: a command ran past its timeoutMs (CodeTimeout).
	EndTimeout = CodeTimeout
	// EndOutputLimit: a command's output passed maxOutputBytes
	// (CodeOutputLimit).
	EndOutputLimit = CodeOutputLimit
	// EndAborted: a command's caller went away before its answer
	// (CodeAborted).
	EndAborted = CodeAborted
	// EndRuntime: the execution reached the end of resources.runtimeMs.
	EndRuntime = "runtime"
	// EndContainerGone: its container stopped or was removed outside the
	// host (docker rm, its main process killed, the engine restarted).
	EndContainerGone = "container_gone"
	// EndUnknown: an end recorded without its reason (by an older
	// gateway).
	EndUnknown = "unknown"
)

// endWords says reason in words, as the gateway's log does not.
func endWords(reason string) string {
	switch reason {
	case EndTerminated:
		return "it was terminated by a DELETE of it (or a Terminate)"
	case EndTimeout:
		return "a command ran past its timeoutMs, which destroys the execution"
	case EndOutputLimit:
		return "a command's stdout and stderr passed resources.maxOutputBytes, which destroys the execution"
	case EndAborted:
		return "the caller of a command went away before its answer, its request cancelled or timed out, which destroys the execution"
	case EndRuntime:
		return "it reached the end of its resources.runtimeMs"
	case EndContainerGone:
		return "its container stopped or was removed outside the gateway"
	}
	return "why was not recorded"
}

// ended is what the host remembers of an ended execution.
type ended struct {
	at     time.Time
	reason string // End*
}

// ago says how long before now t was, for people: "350ms", "12s", "3h2m5s".
func ago(now, t time.Time) string {
	d := max(now.Sub(t), 0)
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// goneError is the answer about id, which ended as end says.
func (h *Docker) goneError(id string, end ended) *Error {
	// The reason and time come before the words, which may end in a
	// parenthesis of their own: "…(or a Terminate) (reason terminated,
	// at …)" read as two afterthoughts, not one sentence.
	return &Error{
		Code:    CodeGone,
		Message: fmt.Sprintf("execution %q ended %s ago (reason %s, at %s): %s", id, ago(h.now(), end.at), end.reason, end.at.UTC().Format(time.RFC3339), endWords(end.reason)),
		Reason:  end.reason,
		EndedAt: end.at,
	}
}

// reuseError refuses a provision that names id, which ended as end says.
func (h *Docker) reuseError(id string, end ended) *Error {
	return &Error{
		Code:    CodeConflict,
		Field:   "executionId",
		Message: fmt.Sprintf("execution %q ended %s ago (%s), and execution ids are not reused: a caller still holding it must keep getting gone; provision under another id", id, ago(h.now(), end.at), end.reason),
		Reason:  end.reason,
		EndedAt: end.at,
	}
}
