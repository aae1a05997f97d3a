package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagReferencePath is where the flag reference lives, from the module's
// root; TestFlagReferenceCurrent checks it is what flagReference renders.
const flagReferencePath = "docs/flags.md"

// flagReference renders root and every command under it as markdown: each
// command's use line and short description, then its flags (name,
// shorthand, type, default, usage), commands and flags in name order.
// Hidden commands and flags, and cobra's own help, are left out. The
// output depends only on the commands, so docs/flags.md can be checked
// against it.
func flagReference(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("# Flag reference\n\n")
	b.WriteString("<!-- Generated from gi's cobra commands by cmd/gi/flagdoc.go; do not edit.\n")
	b.WriteString("     To update: GI_UPDATE_FLAGS=1 go test ./cmd/gi/ -run TestFlagReferenceCurrent -->\n\n")
	b.WriteString("Every command of `gi` and its flags, generated from the commands themselves.\n")
	b.WriteString("`gi <command> --help` prints the same, with a longer description and examples.\n")
	b.WriteString("A duration (`D`) is written as Go writes one: `500ms`, `5s`, `2m`.\n")

	cmds := flagDocCommands(root)
	b.WriteString("\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "- [`%s`](#%s): %s\n", c.CommandPath(), flagDocAnchor(c.CommandPath()), flagDocText(c.Short))
	}
	for _, c := range cmds {
		fmt.Fprintf(&b, "\n## %s\n\n", c.CommandPath())
		if c.Short != "" {
			fmt.Fprintf(&b, "%s\n\n", flagDocText(c.Short))
		}
		use := c.UseLine()
		if !c.Runnable() && c.HasAvailableSubCommands() {
			use = c.CommandPath() + " [command]" // as gi --help says
		}
		fmt.Fprintf(&b, "```\n%s\n```\n", use)

		local := flagDocFlags(c.LocalFlags())
		if len(local) > 0 {
			b.WriteString("\n| flag | shorthand | type | default | usage |\n")
			b.WriteString("| --- | --- | --- | --- | --- |\n")
			for _, f := range local {
				varname, usage := pflag.UnquoteUsage(f)
				name := "--" + f.Name
				if strings.Contains(f.Usage, "`") {
					name += " " + varname // the usage names the value
				}
				short := ""
				if f.Shorthand != "" {
					short = "`-" + f.Shorthand + "`"
				}
				def := f.DefValue
				if def == "" {
					def = `""`
				}
				fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %s |\n",
					flagDocCode(name), short, f.Value.Type(), flagDocCode(def), flagDocText(usage))
			}
		}
		if inherited := flagDocFlags(c.InheritedFlags()); len(inherited) > 0 {
			names := make([]string, len(inherited))
			for i, f := range inherited {
				names[i] = "`--" + f.Name + "`"
			}
			fmt.Fprintf(&b, "\nAlso the flags of [`%s`](#%s): %s.\n",
				root.CommandPath(), flagDocAnchor(root.CommandPath()), strings.Join(names, ", "))
		}
	}
	return b.String()
}

// flagDocCommands returns root and the available commands under it, each
// level in name order, depth first.
func flagDocCommands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	children := append([]*cobra.Command(nil), root.Commands()...)
	sort.Slice(children, func(i, j int) bool { return children[i].Name() < children[j].Name() })
	for _, c := range children {
		if !c.IsAvailableCommand() || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		out = append(out, flagDocCommands(c)...)
	}
	return out
}

// flagDocFlags returns the flags of fs that are not hidden, in name order.
func flagDocFlags(fs *pflag.FlagSet) []*pflag.Flag {
	var out []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Name != "help" {
			out = append(out, f)
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// flagDocAnchor is the anchor GitHub gives a heading of text s.
func flagDocAnchor(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// flagDocText makes s one line of markdown text that renders as s, also in
// a table cell.
func flagDocText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\', '`', '*', '_', '|', '<', '>', '[', ']':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// flagDocCode makes s a code span that renders as s, also in a table cell.
func flagDocCode(s string) string {
	s = strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}
