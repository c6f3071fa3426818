//! Discovery: scanning tool directories, probing each candidate's `description` in parallel, and building the catalog.
//!
//! [`discover`] runs it; [`scan`] finds the candidates, [`probe`] asks them, [`load`] turns
//! what they printed into tools and [`catalog`] holds the result, with [`cache`] remembering
//! probes across runs, [`layers`] naming the directories, [`live`] keeping a catalog current
//! and [`validate`] reporting every check on a file.
//! Rule: nothing here imports `crate::call` (`cargo xtask tidy` checks it).
//!
//! Rules, in the order they apply:
//! - Dotfiles, directories, non-executable files and other special files are skipped silently.
//!   A symbolic link counts as the file it points to; a broken one is a problem.
//! - A file whose name (after mapping `-` to `_`) is not a valid [`ToolName`](crate::name::ToolName) is a problem and is never run.
//! - Two files with one tool name in one directory: the first in sorted order is probed, the other is a problem.
//! - A `NAME.md` file is a manifest: it is read and parsed, never run.
//! - A `NAME-tool` executable is an ikigai tool, probed with `--schema`.
//! - Any other executable is probed with `description` (Kodelet) and, when that fails in a way
//!   an ikigai tool would, with `--schema`; a Kodelet tool is then asked for its optional
//!   `config` (a requested timeout). Each probe runs under [`PROBE_TIMEOUT`](discover::PROBE_TIMEOUT) and
//!   [`PROBE_MAX_OUTPUT`](discover::PROBE_MAX_OUTPUT); any failure (spawn error, timeout, non-zero exit, oversized or
//!   invalid output) is a problem.
//! - The name a tool declares must be its file's name: a mismatch is a problem, so that the file a user sees is the tool the LLM calls.
//! - Among the tools that passed, a later directory shadows an earlier one by name, and the shadowed tool is recorded.
//!   A candidate that failed its probe shadows nothing.
//! - A candidate whose file is unchanged since the [`DiscoveryCache`](cache::DiscoveryCache) saw it is not probed: its cached output is loaded again.
//! - A missing directory is skipped silently, unless the user named it (`--tools-dir`, `[discovery] dirs`).

pub(crate) mod cache;
pub(crate) mod catalog;
pub(crate) mod discover;
pub(crate) mod layers;
pub(crate) mod live;
pub(crate) mod load;
pub(crate) mod probe;
pub(crate) mod scan;
pub(crate) mod validate;
