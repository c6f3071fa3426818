//! The [`Format`] of a tool, the [`Protocol`]s that ask a file what it is, and the [`Runner`]
//! a loaded tool keeps: one place that knows the three formats apart.

use std::fmt;

use crate::formats::ikigai;
use crate::formats::manifest::model::{self, Manifest};
use crate::name::{NameError, ToolName};
use crate::oob::Items;

/// The format a tool was written in, which fixes how it is described and run.
///
/// A file's format is first decided from its name (`Format::of_file`); an executable with
/// no `-tool` suffix is first probed as [`Format::Kodelet`] and becomes an ikigai tool when
/// only `--schema` answers. A loaded tool's format is the one that answered
/// (`Runner::format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// An executable speaking the Kodelet protocol: `tool description` prints
    /// `{name, description, input_schema}` and `tool run` reads the JSON
    /// arguments on stdin.
    Kodelet,
    /// A Nanocoder manifest: `NAME.md` with YAML frontmatter and a shell
    /// body, parsed (never run) at discovery.
    Manifest,
    /// An executable speaking the ikigai protocol: `tool --schema` prints
    /// `{name, description, parameters, returns}` and the tool runs with no
    /// argument and the JSON arguments on stdin.
    Ikigai,
}

impl Format {
    /// The name used in listings and JSON output, e.g. `kodelet`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Kodelet => "kodelet",
            Format::Manifest => "manifest",
            Format::Ikigai => "ikigai",
        }
    }

    /// The tool name a file provides, and its format: `k8s-pods.md` is the manifest
    /// `k8s_pods`, `word-stats-tool` the ikigai tool `word_stats`, `file-read` the Kodelet
    /// tool `file_read`.
    pub(crate) fn of_file(file_name: &str) -> Result<(ToolName, Format), NameError> {
        if let Some(stem) = file_name.strip_suffix(model::FILE_SUFFIX) {
            return ToolName::new(stem).map(|name| (name, Format::Manifest));
        }
        match file_name.strip_suffix(ikigai::FILE_SUFFIX) {
            Some(stem) => ToolName::new(stem).map(|name| (name, Format::Ikigai)),
            None => ToolName::new(file_name).map(|name| (name, Format::Kodelet)),
        }
    }

    /// The protocols a file of this format may be answered by, so the only ones whose cached
    /// output it may reuse.
    pub(crate) fn protocols(self) -> &'static [Protocol] {
        match self {
            Format::Kodelet => &[Protocol::KodeletDescription, Protocol::IkigaiSchema],
            Format::Manifest => &[Protocol::ManifestRead],
            Format::Ikigai => &[Protocol::IkigaiSchema],
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How discovery learns what a file is: one probe per protocol. The discovery cache files
/// each output under its protocol, and reuses it only for that protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Protocol {
    /// `tool description` (then, optionally, `tool config`).
    KodeletDescription,
    /// `tool --schema`.
    IkigaiSchema,
    /// A manifest read from disk; nothing runs.
    ManifestRead,
}

impl Protocol {
    /// The protocols whose records are kept across processes: those that run a program. A
    /// manifest's record (its contents) stays in memory, since reading the file again costs
    /// no more than reading its cache entry.
    pub(crate) const PERSISTED: [Protocol; 2] =
        [Protocol::KodeletDescription, Protocol::IkigaiSchema];

    /// The protocol's name in the cache file.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Protocol::KodeletDescription => "kodelet-description",
            Protocol::IkigaiSchema => "ikigai-schema",
            Protocol::ManifestRead => "manifest-read",
        }
    }

    /// The persisted protocol of this name, if any.
    pub(crate) fn persisted(name: &str) -> Option<Protocol> {
        Protocol::PERSISTED
            .into_iter()
            .find(|protocol| protocol.as_str() == name)
    }
}

/// How a loaded tool is run: its [`Format`], with what running it needs beyond its path.
#[derive(Debug, Clone)]
pub(crate) enum Runner {
    /// `tool run`, arguments as JSON on stdin.
    Kodelet,
    /// The manifest's body, rendered with the arguments, run by its shell.
    Manifest(Box<Manifest>),
    /// `tool` with no argument, arguments as JSON on stdin.
    Ikigai,
}

impl Runner {
    /// The format of the tool this runs.
    pub(crate) fn format(&self) -> Format {
        match self {
            Runner::Kodelet => Format::Kodelet,
            Runner::Manifest(_) => Format::Manifest,
            Runner::Ikigai => Format::Ikigai,
        }
    }

    /// Whether the elements of array arguments get variables of their own when passed out of
    /// band: a manifest's body uses them, an executable reads the array's JSON.
    pub(crate) fn items(&self) -> Items {
        match self {
            Runner::Manifest(_) => Items::PerElement,
            Runner::Kodelet | Runner::Ikigai => Items::JsonOnly,
        }
    }

    /// The manifest, for a manifest tool.
    pub(crate) fn manifest(&self) -> Option<&Manifest> {
        match self {
            Runner::Manifest(manifest) => Some(manifest),
            Runner::Kodelet | Runner::Ikigai => None,
        }
    }
}
