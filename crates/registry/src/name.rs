//! Tool names: the validated identifier of a tool and the name an LLM sees.

use std::fmt;

/// The prefix that turns a tool name into the name exposed to an LLM.
pub const EXPOSED_PREFIX: &str = "custom_tool_";

/// The name of the meta-tool that creates tools; no tool may take it.
pub const RESERVED_NAME: &str = "custom_tool";

/// The longest exposed name the strictest LLM API accepts.
pub(crate) const MAX_EXPOSED_LEN: usize = 64;

/// A valid tool name: `^[a-z][a-z0-9_]*$` once `-` is mapped to `_`, short
/// enough that `custom_tool_<name>` fits in `MAX_EXPOSED_LEN` characters,
/// and neither the meta-tool's name `custom_tool` nor starting with
/// `custom_tool_` (so that an exposed name maps back to exactly one tool).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolName(String);

/// Why a string is not a valid tool name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("a tool name cannot be empty")]
    Empty,
    /// The name does not start with a lowercase ASCII letter.
    #[error("tool name `{name}` must start with a lowercase letter")]
    BadStart {
        /// The offending name.
        name: String,
    },
    /// The name holds a character outside `[a-z0-9_-]`.
    #[error("tool name `{name}` contains `{character}`; only a-z, 0-9, `_` and `-` are allowed")]
    BadCharacter {
        /// The offending name.
        name: String,
        /// The first character that is not allowed.
        character: char,
    },
    /// `custom_tool_<name>` would be longer than `MAX_EXPOSED_LEN`.
    #[error(
        "tool name `{name}` is too long: `custom_tool_{name}` has {len} characters, the limit is {MAX_EXPOSED_LEN}"
    )]
    TooLong {
        /// The offending name.
        name: String,
        /// The length of the exposed name.
        len: usize,
    },
    /// The name is the `custom_tool` meta-tool's, or starts with the exposed
    /// prefix, which would make `custom_tool_<name>` ambiguous.
    #[error(
        "tool name `{name}` is reserved: `custom_tool` and names starting with `custom_tool_` belong to the meta-tool"
    )]
    Reserved {
        /// The offending name.
        name: String,
    },
}

impl ToolName {
    /// Validates `name`, mapping `-` to `_` first (file `file-read` is tool `file_read`).
    pub fn new(name: &str) -> Result<ToolName, NameError> {
        let mut chars = name.chars();
        let Some(first) = chars.next() else {
            return Err(NameError::Empty);
        };
        if !first.is_ascii_lowercase() {
            return Err(NameError::BadStart {
                name: name.to_owned(),
            });
        }
        if let Some(character) = chars.find(|character| {
            !(character.is_ascii_lowercase()
                || character.is_ascii_digit()
                || *character == '_'
                || *character == '-')
        }) {
            return Err(NameError::BadCharacter {
                name: name.to_owned(),
                character,
            });
        }
        let normalized = name.replace('-', "_");
        if normalized == RESERVED_NAME || normalized.starts_with(EXPOSED_PREFIX) {
            return Err(NameError::Reserved { name: normalized });
        }
        let len = EXPOSED_PREFIX.len() + normalized.len();
        if len > MAX_EXPOSED_LEN {
            return Err(NameError::TooLong {
                name: normalized,
                len,
            });
        }
        Ok(ToolName(normalized))
    }

    /// Accepts either a tool name or its exposed form `custom_tool_<name>`.
    pub fn from_exposed_or_plain(name: &str) -> Result<ToolName, NameError> {
        match name.strip_prefix(EXPOSED_PREFIX) {
            Some(plain) if !plain.is_empty() => ToolName::new(plain),
            _ => ToolName::new(name),
        }
    }

    /// A name as a policy list (`[policy] disabled`, `allowed`) names it: a tool name, its
    /// exposed form, or the meta-tool's own name `custom_tool` ([`ToolName::meta_tool`]),
    /// so that the meta-tool obeys the lists like every tool.
    pub fn in_policy_list(name: &str) -> Result<ToolName, NameError> {
        if name.replace('-', "_") == RESERVED_NAME {
            return Ok(ToolName::meta_tool());
        }
        ToolName::from_exposed_or_plain(name)
    }

    /// The meta-tool's name, `custom_tool`, for policy to judge the meta-tool by
    /// ([`crate::Policy::check_meta_tool`]). No discovered tool has it: [`ToolName::new`]
    /// refuses it.
    pub fn meta_tool() -> ToolName {
        ToolName(RESERVED_NAME.to_owned())
    }

    /// The name as written in tool listings, e.g. `file_read`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name exposed to an LLM, e.g. `custom_tool_file_read`.
    pub fn exposed(&self) -> String {
        format!("{EXPOSED_PREFIX}{}", self.0)
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use crate::name::{NameError, ToolName};

    fn check(input: &str, expect: Result<&str, &str>) {
        let actual = ToolName::new(input);
        match (actual, expect) {
            (Ok(name), Ok(expected)) => assert_eq!(name.as_str(), expected),
            (Err(error), Err(expected)) => assert_eq!(error.to_string(), expected),
            (actual, expected) => panic!("{input:?}: got {actual:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn plain() {
        check("hello", Ok("hello"));
        check("git_info", Ok("git_info"));
        check("a1", Ok("a1"));
    }

    #[test]
    fn dash_maps_to_underscore() {
        check("file-read", Ok("file_read"));
    }

    #[test]
    fn empty() {
        check("", Err("a tool name cannot be empty"));
    }

    #[test]
    fn bad_start() {
        check(
            "1abc",
            Err("tool name `1abc` must start with a lowercase letter"),
        );
        check(
            "_abc",
            Err("tool name `_abc` must start with a lowercase letter"),
        );
        check(
            "Hello",
            Err("tool name `Hello` must start with a lowercase letter"),
        );
    }

    #[test]
    fn bad_character() {
        check(
            "hello.py",
            Err("tool name `hello.py` contains `.`; only a-z, 0-9, `_` and `-` are allowed"),
        );
        check(
            "helloWorld",
            Err("tool name `helloWorld` contains `W`; only a-z, 0-9, `_` and `-` are allowed"),
        );
    }

    #[test]
    fn reserved() {
        let reserved = |name: &str| {
            format!(
                "tool name `{name}` is reserved: `custom_tool` and names starting with `custom_tool_` belong to the meta-tool"
            )
        };
        check("custom_tool", Err(&reserved("custom_tool")));
        check("custom-tool", Err(&reserved("custom_tool")));
        check("custom_tool_x", Err(&reserved("custom_tool_x")));
        check("custom_tools", Ok("custom_tools"));
    }

    #[test]
    fn length_limit() {
        let longest = "a".repeat(64 - "custom_tool_".len());
        check(&longest, Ok(&longest));
        let too_long = format!("{longest}b");
        assert_eq!(
            ToolName::new(&too_long),
            Err(NameError::TooLong {
                name: too_long.clone(),
                len: 65
            })
        );
    }

    #[test]
    fn exposed_forms() {
        let name = ToolName::from_exposed_or_plain("custom_tool_hello").unwrap();
        assert_eq!(name.as_str(), "hello");
        assert_eq!(name.exposed(), "custom_tool_hello");
        assert_eq!(
            ToolName::from_exposed_or_plain("hello").unwrap().as_str(),
            "hello"
        );
        assert_eq!(
            ToolName::from_exposed_or_plain("custom_tool_"),
            Err(NameError::Reserved {
                name: "custom_tool_".to_owned()
            })
        );
    }
}
