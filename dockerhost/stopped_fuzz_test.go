package dockerhost

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseCandidates: whatever killStoppedScript's output, a refusal
// says at least two matched and names no more pids than matched (nor
// than the script lists), each a positive pid.
func FuzzParseCandidates(f *testing.F) {
	f.Add("? 2 41 57")
	f.Add("? 20 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17")
	f.Add("1")
	f.Add("? 1 5")
	f.Fuzz(func(t *testing.T, res string) {
		e := parseCandidates(res)
		if e == nil {
			return
		}
		if e.Count < 2 || len(e.PIDs) == 0 || len(e.PIDs) > e.Count || len(e.PIDs) > maxStoppedCandidates {
			t.Fatalf("parseCandidates(%q) = %+v", res, e)
		}
		for _, p := range e.PIDs {
			if p <= 0 {
				t.Fatalf("parseCandidates(%q): pid %d", res, p)
			}
		}
	})
}

func TestParseCandidates(t *testing.T) {
	if e := parseCandidates("? 3 41 57 90"); e == nil || e.Count != 3 || len(e.PIDs) != 3 || e.PIDs[2] != 90 {
		t.Errorf("three candidates: %+v", e)
	}
	// The script lists /proc's glob, which sorts as strings.
	if e := parseCandidates("? 3 100 41 9"); e == nil || !slices.Equal(e.PIDs, []int{9, 41, 100}) {
		t.Errorf("candidates 100 41 9 as the glob lists them: %+v, want them in number order", e)
	}
	many := "? 40" + strings.Repeat(" 7", maxStoppedCandidates)
	if e := parseCandidates(many); e == nil || e.Count != 40 || len(e.PIDs) != maxStoppedCandidates {
		t.Errorf("forty candidates, the first %d named: %+v", maxStoppedCandidates, e)
	}
	for _, res := range []string{"0", "1", "? 1 5", "? 2 5", "? 2 5 -1", "? 2 5 x", "? x 5 6", "? 2 5 6 7", many + " 8"} {
		if e := parseCandidates(res); e != nil {
			t.Errorf("parseCandidates(%q) = %+v, want not a refusal", res, e)
		}
	}
}

// FuzzStatusFields: the Name and NSpid lines of a /proc/PID/status, among
// others, are read back as the kernel wrote them, spaces and tabs around
// them trimmed; and any text at all is read without a panic.
func FuzzStatusFields(f *testing.F) {
	f.Add("agent", "4242\t17", "State:\tS (sleeping)")
	f.Add("runc:[2:INIT]", "12", "")
	f.Fuzz(func(t *testing.T, name, nspid, other string) {
		statusFields(name + nspid + other) // any text
		if strings.ContainsAny(name+nspid+other, "\n\r") || strings.HasPrefix(other, "Name:") || strings.HasPrefix(other, "NSpid:") {
			return
		}
		status := "Name:\t" + name + "\n" + other + "\nNSpid:\t" + nspid + "\nUmask:\t0022\n"
		gotName, gotNSpid := statusFields(status)
		if gotName != strings.TrimSpace(name) || gotNSpid != strings.TrimSpace(nspid) {
			t.Fatalf("statusFields(%q) = %q, %q; want %q, %q", status, gotName, gotNSpid, strings.TrimSpace(name), strings.TrimSpace(nspid))
		}
	})
}
