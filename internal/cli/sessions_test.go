package cli

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"
)

func TestFlagsBeforeDash(t *testing.T) {
	cases := []struct {
		argv    []string
		want    []string
		id      string
		wantErr bool
	}{
		{[]string{"--", "ls", "-l"}, []string{"ls", "-l"}, "", false},
		{[]string{"--id", "web", "--", "python3", "-m", "x"}, []string{"python3", "-m", "x"}, "web", false},
		{[]string{"ls", "-l"}, []string{"ls", "-l"}, "", false},
		{[]string{"-l", "x"}, []string{"-l", "x"}, "", false}, // no "--": all of it is the command
		{[]string{"--id", "web", "stray", "--", "ls"}, nil, "", true},
		{[]string{"--nope", "--", "ls"}, nil, "", true},
	}
	for _, c := range cases {
		var id string
		cmd := &cobra.Command{}
		cmd.Flags().StringVar(&id, "id", "", "")
		cmd.Flags().SetInterspersed(false)
		got, err := flagsBeforeDash(cmd, c.argv)
		if (err != nil) != c.wantErr || (!c.wantErr && (!slices.Equal(got, c.want) || id != c.id)) {
			t.Errorf("%q: got %q id %q err %v; want %q id %q err %v", c.argv, got, id, err, c.want, c.id, c.wantErr)
		}
	}
}

func TestParseSizeBytes(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true}, {"64K", 64 << 10, true}, {"4m", 4 << 20, true},
		{"", 0, false}, {"-1", 0, false}, {"1G", 0, false}, {"K", 0, false},
	}
	for _, c := range cases {
		got, err := parseSizeBytes("log-buffer", c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%q: %d %v", c.in, got, err)
		}
	}
}
