package dockerhost

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
)

// mobyReplaceOrAppendEnvValues is moby v28.5.2's
// container.ReplaceOrAppendEnvValues as it is written, the reference for
// replaceOrAppendEnv.
func mobyReplaceOrAppendEnvValues(defaults, overrides []string) []string {
	cache := make(map[string]int, len(defaults))
	for i, e := range defaults {
		index := strings.Index(e, "=")
		cache[e[:index]] = i
	}
	for _, value := range overrides {
		// Values w/o = means they want this env to be removed/unset.
		index := strings.Index(value, "=")
		if index < 0 {
			if i, exists := cache[value]; exists {
				defaults[i] = "" // Used to indicate it should be removed
			}
			continue
		}
		if i, exists := cache[value[:index]]; exists {
			defaults[i] = value
		} else {
			defaults = append(defaults, value)
		}
	}
	for i := 0; i < len(defaults); i++ {
		if defaults[i] == "" {
			defaults = append(defaults[:i], defaults[i+1:]...)
			i--
		}
	}
	return defaults
}

// FuzzContainerEnvBytes: a command's argument space is counted from the
// container's environment read once (readContainerEnv, from the engine's
// inspection: an image's variables are anything its maker wrote) plus
// the command's env (names as the API takes them). The count must be
// what the environment the command gets takes, exactly: under it, a
// command let through fails with "argument list too long" (an image's
// "BIG=…" then "BIG", whose BIG the engine keeps); over it, one that
// would run is refused. The reference is
// the engine's own steps: moby's CreateDaemonEnvironment (no tty) and the
// exec's env over it, each mobyReplaceOrAppendEnvValues, then the
// runtime, which keeps a repeated name's last value (docker exec of a
// container whose Config.Env is A=1, B=2, A=3 gives A=3 alone), then
// runc's HOME.
func FuzzContainerEnvBytes(f *testing.F) {
	f.Add("A=1\x00B=2\x00A=3", "box", "A\x00x\x00HOME\x00/h")
	f.Add("PATH=/x\x00HOSTNAME=y\x00FOO", "", "FOO\x00bar\x00PATH\x00/y")
	f.Add("HOME=/root\x00=\x00X=a=b\x00X", "h", "X\x00")
	f.Add("PATH\x00FOO=1\x00FOO\x00PATH=/p", "h", "")
	f.Fuzz(func(t *testing.T, cfg, hostname, req string) {
		var cfgEnv []string
		if cfg != "" {
			cfgEnv = strings.Split(cfg, "\x00")
		}
		env := map[string]string{}
		kv := strings.Split(req, "\x00")
		for i := 0; i+1 < len(kv); i += 2 {
			if !envNameRE.MatchString(kv[i]) {
				return // refused by validation before any count
			}
			env[kv[i]] = kv[i+1]
		}
		ce := readContainerEnv(container.InspectResponse{Config: &container.Config{Env: cfgEnv, Hostname: hostname}})
		engine := mobyReplaceOrAppendEnvValues([]string{"PATH=" + defaultPath, "HOSTNAME=" + hostname}, slices.Clone(cfgEnv))
		engine = mobyReplaceOrAppendEnvValues(engine, envList(env))
		last := map[string]string{}
		for _, e := range engine {
			k, _, _ := strings.Cut(e, "=")
			last[k] = e
		}
		if _, ok := last["HOME"]; !ok {
			last["HOME"] = "HOME=/nonexistent"
		}
		want := 0
		for _, e := range last {
			want += len(e) + 1 + 8
		}
		got := ce.bytesWith(env)
		if got != want {
			t.Fatalf("image env %q, hostname %q, command env %q: counted %d bytes, the environment the command gets, %q, takes %d",
				cfgEnv, hostname, env, got, slices.Sorted(maps.Values(last)), want)
		}
	})
}
