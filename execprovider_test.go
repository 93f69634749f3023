package hostgate_test

import (
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
	"github.com/hostgate/hostgate/providertest"
)

func TestExecProviderConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
		return hostgate.ExecProvider(&localexec.Transport{}), t.TempDir()
	})
}
