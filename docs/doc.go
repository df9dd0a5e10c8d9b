// Package docs holds infergate's user documentation as Markdown pages
// (README.md at the repository root and the pages in this folder). It has
// no code: its test keeps the pages' relative links pointing at files that
// exist and the README short enough to be read as a quick start.
package docs
