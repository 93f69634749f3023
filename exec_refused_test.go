//go:build unix

package hostgate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// TestExecRefusedQuotesNoCommandLine: a command the host refuses to
// start (here a line past the 128 KiB a Linux host passes its shell as
// one argument) fails with an error that says why it may be, and quotes
// none of the line: x/crypto's words for the refusal carried it whole,
// the environment's values (a token) with it, into the caller's logs,
// 200 KiB of it, while blaming a missing shell or a pids limit.
func TestExecRefusedQuotesNoCommandLine(t *testing.T) {
	h := sshHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const secret = "s3cr3t-token-value"
	big := strings.Repeat("a", 200<<10)
	res, err := h.Exec(ctx, []string{"echo", big}, hostgate.ExecOptions{SpawnOptions: hostgate.SpawnOptions{Env: map[string]string{"API_TOKEN": secret}}})
	if err == nil {
		t.Fatalf("a 200 KiB command line ran: %d bytes out", len(res.Stdout))
	}
	msg := err.Error()
	if strings.Contains(msg, secret) || strings.Contains(msg, "aaaaaaaa") {
		t.Errorf("the error quotes the command line (%d bytes): %.300s…", len(msg), msg)
	}
	if !strings.Contains(msg, "128 KiB") {
		t.Errorf("the error does not say the line is too long: %.300s", msg)
	}
	// A line within the bound still runs.
	res, err = h.Exec(ctx, []string{"sh", "-c", `echo ${#1}`, "sh", strings.Repeat("a", 100<<10)}, hostgate.ExecOptions{})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "102400" {
		t.Errorf("a 100 KiB argument: %v, %q", err, res.Stdout)
	}
}
