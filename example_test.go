package hostgate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hostgate/hostgate"
)

// Show a command's output as it comes and still get the collected result:
// Stdout and Stderr are given the output as it arrives, and the result
// holds it all, as Exec without them.
func ExampleHost_Exec_stream() {
	var host *hostgate.Host // from client.Dial or hostgate.New
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	res, err := host.Exec(ctx, []string{"make", "test"}, hostgate.ExecOptions{
		SpawnOptions: hostgate.SpawnOptions{Dir: "/workspace"},
		Stdout:       os.Stdout, // a slow terminal or socket never holds the command up
		Stderr:       os.Stderr,
	})
	switch {
	case errors.Is(err, hostgate.ErrOutputLimit):
		fmt.Println("more output than MaxOutput: the command was killed")
	case err != nil:
		// The command could not run, ctx ended, or a writer failed
		// (the command then ran on to its end, and res has its output).
		fmt.Println("exec:", err)
	}
	if res != nil {
		fmt.Printf("exit %d after %v, %d bytes of output\n", res.ExitCode, res.Duration, len(res.Stdout)+len(res.Stderr))
	}
}
