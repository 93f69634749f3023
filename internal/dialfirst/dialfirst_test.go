package dialfirst

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Dial keeps the first address that answers and closes the rest.
func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	conn, err := Dial(context.Background(), []string{deadAddr, ln.Addr().String()}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.RemoteAddr().String(); got != ln.Addr().String() {
		t.Errorf("connected to %s, want the live %s", got, ln.Addr())
	}
	_ = conn.Close()
	_, err = Dial(context.Background(), []string{deadAddr}, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "no address answered") {
		t.Fatalf("no address answering: %v", err)
	}
	if _, err := Dial(context.Background(), nil, time.Minute); err == nil {
		t.Fatal("no address at all: no error")
	}
}
