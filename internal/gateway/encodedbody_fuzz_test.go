package gateway

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/textcut"
)

// FuzzEncodedBody: Content-Encoding is a caller's header, any number of
// values of comma-separated codings. A body is refused exactly when one
// coding is neither empty nor identity, and the message quotes the first
// such coding, cut, so that a header of any length makes a bounded answer.
func FuzzEncodedBody(f *testing.F) {
	for _, s := range []string{"", "identity", "gzip", "IDENTITY, ,identity", " ,gzip", "identity\nbr", "x-" + strings.Repeat("é", 80), "\xff\x00,zstd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("POST", "/v1/x", nil)
		// Each line is one Content-Encoding field of the request.
		values := strings.Split(header, "\n")
		r.Header["Content-Encoding"] = values
		first, found := "", false
		for _, v := range values {
			for c := range strings.SplitSeq(v, ",") {
				if c = strings.TrimSpace(c); !found && c != "" && !strings.EqualFold(c, "identity") {
					first, found = c, true
				}
			}
		}
		msg, refused := EncodedBody(r)
		if refused != found {
			t.Fatalf("Content-Encoding %q: refused %v, want %v", values, refused, found)
		}
		if !refused {
			return
		}
		if want := fmt.Sprintf("%q", textcut.Cut(first, 64)); !strings.Contains(msg, want) {
			t.Fatalf("Content-Encoding %q: %q does not name %s", values, msg, want)
		}
		// %q writes a byte as at most 4 ("\xff"), a rune as at most 10.
		if len(msg) > 160+4*(64+len("…")) {
			t.Fatalf("Content-Encoding of %d bytes: a message of %d", len(header), len(msg))
		}
	})
}
