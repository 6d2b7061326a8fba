// Package workdir resolves a child agent's working directory (contract R-51): a configured
// cwd, resolved against the process's, else the parent session's; the result is absolute,
// symlink-free and an accessible directory, or a *subagent.ValidationError with the
// contract's exact message. It stats the file system, which is why it is not part of the
// pure package subagent.
package workdir
