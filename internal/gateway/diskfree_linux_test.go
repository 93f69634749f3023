package gateway

import "testing"

func TestDiskFreeMeasures(t *testing.T) {
	free, total, err := diskFree(t.TempDir())
	if err != nil || total == 0 || free > total {
		t.Fatalf("diskFree: %d free of %d: %v", free, total, err)
	}
	if _, _, err := diskFree("/nonexistent/state"); err == nil {
		t.Fatal("diskFree of a missing dir: no error")
	}
}
