package bench

import "testing"

// TestConntrack reads this machine's table when netfilter has one: a count
// within the limit.
func TestConntrack(t *testing.T) {
	count, limit, ok, err := Conntrack()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("no conntrack table on this machine")
	}
	if limit <= 0 || count < 0 || count > limit {
		t.Fatalf("conntrack count %d, limit %d", count, limit)
	}
}
