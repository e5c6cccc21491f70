package paddock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
	"github.com/paddock-dev/paddock/sdk/go/paddock/paddocktest"
)

// A program normally uses the zero Client, which talks to the local daemon;
// the examples use the in-memory fake so they run anywhere.
func Example() {
	fake := paddocktest.NewServer()
	defer fake.Close()
	c := fake.Client() // in real use: &paddock.Client{} or var c paddock.Client

	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Name: "dev", Image: "base"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Delete(context.WithoutCancel(ctx), sb.ID)

	res, err := c.Exec(ctx, sb.ID, paddock.ExecOptions{
		Cmd:    []string{"echo", "hello"},
		Stdout: os.Stdout, // streamed as it arrives
	})
	if err != nil {
		fmt.Println("the command's status is unknown:", err)
		return
	}
	fmt.Println("exit code", res.ExitCode)
	// Output:
	// hello
	// exit code 0
}

func ExampleClient_Get_notFound() {
	fake := paddocktest.NewServer()
	defer fake.Close()
	c := fake.Client()

	_, err := c.Get(context.Background(), "no-such-sandbox")
	fmt.Println(errors.Is(err, paddock.ErrNotFound))
	// Output: true
}

func ExampleClient_WriteFile() {
	fake := paddocktest.NewServer()
	defer fake.Close()
	c := fake.Client()
	ctx := context.Background()
	sb, _ := c.Create(ctx, api.CreateSandboxRequest{})

	// Relative paths are the sandbox user's home; AsUser("root") reaches anywhere.
	if _, err := c.WriteFile(ctx, sb.ID, "notes.txt", strings.NewReader("remember"), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	var b strings.Builder
	if err := c.ReadFile(ctx, sb.ID, "/home/user/notes.txt", &b); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.String())
	// Output: remember
}
