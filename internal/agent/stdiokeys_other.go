//go:build !linux

package agent

import "os"

// ownOOMScoreAdj is nil: oom_score_adj is Linux's.
func ownOOMScoreAdj() *os.File { return nil }

// protectKeys has no portable equivalent of PR_SET_DUMPABLE; the keys
// preamble is still kept out of argv, environment and files.
func protectKeys() error { return nil }
