package proc

import "testing"

func TestHexAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"0500000A:A8B2":                         "10.0.0.5:43186",
		"00000000000000000000000001000000:0050": "[::1]:80",
		"0000000000000000FFFF00000100007F:01BB": "127.0.0.1:443", // IPv4-mapped
		"garbage":                               "garbage",
	} {
		if got := hexAddr(in); got != want {
			t.Errorf("hexAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFDString(t *testing.T) {
	for _, c := range []struct {
		fd   FD
		want string
	}{
		{FD{FD: 7, Kind: "tcp", Local: "10.0.0.5:43122", Remote: "10.0.0.9:5432"}, "tcp 10.0.0.5:43122 → 10.0.0.9:5432 fd 7"},
		{FD{FD: 3, Kind: "tcp", Local: "127.0.0.1:8080"}, "tcp 127.0.0.1:8080 fd 3"},
		{FD{FD: 5, Kind: "pipe"}, "pipe fd 5"},
		{FD{FD: 4, Kind: "file", Path: "/var/log/x"}, "file /var/log/x fd 4"},
		{FD{FD: 9}, "fd 9"},
	} {
		if got := c.fd.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.fd, got, c.want)
		}
	}
}
