package config

import (
	"slices"
	"strings"
	"testing"
)

func TestParseServerURLs(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want []string
		err  string
	}{
		{[]string{"http://a:8080"}, []string{"http://a:8080"}, ""},
		{[]string{"http://a:8080/, https://b:8443", "http://c:8080"}, []string{"http://a:8080", "https://b:8443", "http://c:8080"}, ""},
		{[]string{"http://a:8080,,"}, []string{"http://a:8080"}, ""},
		{[]string{"a:8080"}, nil, "want an http:// or https:// URL"},
		{[]string{"ftp://a"}, nil, "want an http:// or https:// URL"},
		{[]string{"http://"}, nil, "want an http:// or https:// URL"},
		{[]string{"http://a:8080?x=1"}, nil, "want an http:// or https:// URL"},
		{[]string{"http://a:8080", "http://a:8080/"}, nil, "appears twice"},
		{[]string{" , "}, nil, "no server URL"},
	} {
		got, err := ParseServerURLs(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
	cfg := Default()
	cfg.Server.Client.Servers = []string{"10.0.0.5:8080"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "server.client.servers") {
		t.Errorf("Validate with a bad server URL: %v", err)
	}
}
