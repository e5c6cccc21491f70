package controller

import (
	"reflect"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

func TestInjectionChanges(t *testing.T) {
	a := api.Injection{Host: "a.test", Header: "Authorization", Value: "Bearer {{secret:x}}"}
	a2 := api.Injection{Host: "a.test", Header: "Authorization", Value: "Bearer {{secret:y}}"}
	b := api.Injection{Host: "b.test", Header: "X-Key", Value: "{{secret:k}}"}
	c := api.Injection{Host: "a.test", Header: "X-Key", Value: "1"}
	actions := func(chs []injectionChange) []string {
		var out []string
		for _, ch := range chs {
			out = append(out, ch.action+" "+ch.in.Host+" "+ch.in.Header)
		}
		return out
	}
	tests := []struct {
		name     string
		from, to []api.Injection
		want     []string
	}{
		{name: "nothing", want: nil},
		{name: "same", from: []api.Injection{a, b}, to: []api.Injection{a, b}, want: nil},
		{name: "added", from: []api.Injection{a}, to: []api.Injection{a, b}, want: []string{"set b.test X-Key"}},
		{name: "removed", from: []api.Injection{a, b}, to: []api.Injection{b}, want: []string{"remove a.test Authorization"}},
		{name: "template changed", from: []api.Injection{a}, to: []api.Injection{a2}, want: []string{"set a.test Authorization"}},
		{name: "other header of the same host", from: []api.Injection{a}, to: []api.Injection{c}, want: []string{"set a.test X-Key", "remove a.test Authorization"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := actions(injectionChanges(tc.from, tc.to)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
