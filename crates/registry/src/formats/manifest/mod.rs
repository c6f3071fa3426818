//! Nanocoder manifests: `NAME.md` with YAML frontmatter and a shell-script body, parsed and checked at load time, and the command that runs a call.
//!
//! Every field of the proposal is read, plus `fail_on_exit`; any other key is
//! an error that names it, because a misspelt key silently ignored (say
//! `timeout: 5000`) is worse than a tool that does not load.
//! Every error names the field as written in the file, e.g.
//! `parameters.namespace.pattern: only allowed for type string`, and all
//! errors of a file are reported at once (the frontmatter fields in a fixed order, then the body).

pub(crate) mod command;
pub(crate) mod error;
pub(crate) mod expand;
pub(crate) mod frontmatter;
pub(crate) mod model;
pub(crate) mod parameters;
pub(crate) mod render;
mod tag_context;
#[cfg(test)]
mod tests;
