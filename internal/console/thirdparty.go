package console

// thirdPartyDir is where the build puts the npm packages' files, under
// assets/; it is not in the repository (.gitignore).
const thirdPartyDir = "third_party"

// NPMFile is one file taken from an npm package's tarball.
type NPMFile struct {
	From string // path in the tarball, "package/..."
	To   string // name under assets/third_party
}

// NPMPackage is one pinned package: fetched from the npm registry at build
// time and checked against its registry integrity (sha512) before use.
type NPMPackage struct {
	Name      string
	Version   string
	Tarball   string
	Integrity string // "sha512-<base64>", as the registry publishes it
	Files     []NPMFile
}

// ThirdParty is every package the console bundles.
var ThirdParty = []NPMPackage{
	{
		Name:      "@xterm/xterm",
		Version:   "6.0.0",
		Tarball:   "https://registry.npmjs.org/@xterm/xterm/-/xterm-6.0.0.tgz",
		Integrity: "sha512-TQwDdQGtwwDt+2cgKDLn0IRaSxYu1tSUjgKarSDkUM0ZNiSRXFpjxEsvc/Zgc5kq5omJ+V0a8/kIM2WD3sMOYg==",
		Files: []NPMFile{
			{From: "package/lib/xterm.js", To: "xterm.js"},
			{From: "package/css/xterm.css", To: "xterm.css"},
			{From: "package/LICENSE", To: "xterm.LICENSE.txt"},
		},
	},
	{
		Name:      "@xterm/addon-fit",
		Version:   "0.11.0",
		Tarball:   "https://registry.npmjs.org/@xterm/addon-fit/-/addon-fit-0.11.0.tgz",
		Integrity: "sha512-jYcgT6xtVYhnhgxh3QgYDnnNMYTcf8ElbxxFzX0IZo+vabQqSPAjC3c1wJrKB5E19VwQei89QCiZZP86DCPF7g==",
		Files: []NPMFile{
			{From: "package/lib/addon-fit.js", To: "addon-fit.js"},
			{From: "package/LICENSE", To: "addon-fit.LICENSE.txt"},
		},
	},
}
