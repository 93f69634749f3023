package bytestream

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(stdioHelperEnv) != "" {
		os.Exit(runStdioHelper())
	}
	goleak.VerifyTestMain(m)
}
