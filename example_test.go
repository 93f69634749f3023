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

// Move a tree: up from a local directory into the host's workspace, a
// build there, and its output back into a local directory.
func ExampleUpload() {
	var host *hostgate.Host // from client.Dial or hostgate.New
	ctx := context.Background()

	if err := hostgate.Upload(ctx, host, os.DirFS("./project"), "/workspace/project", nil); err != nil {
		fmt.Println("upload:", err)
		return
	}
	res, err := host.Exec(ctx, []string{"make", "-C", "/workspace/project", "dist"}, hostgate.ExecOptions{Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil || res.ExitCode != 0 {
		fmt.Println("build failed:", err)
		return
	}
	// What the host sends is checked: no name leaves ./dist.
	err = hostgate.Download(ctx, host, "/workspace/project/dist", "./dist", &hostgate.TransferOptions{MaxBytes: 256 << 20})
	if errors.Is(err, hostgate.ErrTransferLimit) {
		fmt.Println("dist is over 256 MiB")
	}
}
