package hostgate

import "context"

// WrapFunc rewrites a process's argv and environment, given its working
// directory: to run it under an OS sandbox, nice, sudo -u, bwrap.
type WrapFunc func(argv []string, dir string, env map[string]string) ([]string, map[string]string)

// Wrap returns a Host that runs every process of base through wrap. Its
// filesystem, info, forwarding and synchronous filesystem are base's; closing
// it does not close base (closing stays base's owner's job).
func Wrap(base *Host, wrap WrapFunc) *Host {
	return New(base.Info(), func(ctx context.Context) (*Connection, error) {
		c, err := base.Connection(ctx)
		if err != nil {
			return nil, err
		}
		fs := c.FS
		if fs == nil {
			fs = ExecProvider(c.Transport)
		}
		// A lazy base may have learnt its info only now, by connecting.
		info := base.Info()
		return &Connection{
			Info:      &info,
			Transport: wrappedTransport{base: c.Transport, wrap: wrap},
			FS:        fs,
			Forward:   c.Forward,
			Sync:      c.Sync,
			Close:     func() error { return nil },
		}, nil
	})
}

type wrappedTransport struct {
	base Transport
	wrap WrapFunc
}

func (w wrappedTransport) Spawn(ctx context.Context, argv []string, opts SpawnOptions) (Process, error) {
	env := make(map[string]string, len(opts.Env))
	for k, v := range opts.Env {
		env[k] = v
	}
	argv, env = w.wrap(append([]string(nil), argv...), opts.Dir, env)
	opts.Env = env
	return w.base.Spawn(ctx, argv, opts)
}

// OwnsSupervision passes the base's answer through: wrapping does not change
// who supervises the process.
func (w wrappedTransport) OwnsSupervision() bool { return ownsSupervision(w.base) }
