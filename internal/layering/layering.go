// Package layering holds the test of gi's import rule: each of gi's
// packages owns one concept, and imports point down the architecture
// table of docs/architecture.md, never up. It has no code of its own.
package layering
