package gateway

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// FuzzParseTrustedProxies: --trusted-proxy (HOSTGATE_TRUSTED_PROXY) is
// a list the operator writes, and a peer is matched against it by its
// address unmapped. Every address an entry names, and an entry's
// network's first address, must be trusted by the list parsed; the list
// printed back parses to itself.
func FuzzParseTrustedProxies(f *testing.F) {
	for _, s := range []string{
		"10.0.0.0/8, 192.168.1.7",
		"::1,2001:db8::/32",
		"::ffff:10.0.0.1",
		"::ffff:10.0.0.0/104",
		"fe80::1%eth0",
		" , ,1.2.3.4/33",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseTrustedProxies(s)
		if err != nil {
			return
		}
		for e := range strings.SplitSeq(s, ",") {
			e = strings.TrimSpace(e)
			var a netip.Addr
			if p, err := netip.ParsePrefix(e); err == nil {
				a = p.Masked().Addr()
			} else if a, err = netip.ParseAddr(e); err != nil {
				if e != "" {
					t.Fatalf("%q: entry %q parsed as neither, yet the list was taken", s, e)
				}
				continue
			}
			if a = a.Unmap(); a.Zone() == "" && !trusted(ps, a) {
				t.Fatalf("%q: entry %q names %v, which the list %v does not trust", s, e, a, ps)
			}
		}
		var out []string
		for _, p := range ps {
			if !p.IsValid() || p != p.Masked() {
				t.Fatalf("%q: %v is not a masked prefix", s, p)
			}
			out = append(out, p.String())
		}
		again, err := ParseTrustedProxies(strings.Join(out, ","))
		if err != nil || !slices.Equal(again, ps) {
			t.Fatalf("%q: %v printed %q parses to %v, %v", s, ps, out, again, err)
		}
	})
}
