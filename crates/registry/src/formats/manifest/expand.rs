//! `${VAR}` and `${VAR:-default}` substitution in a manifest's `cwd` and `env`, checked at load time and applied at call time from the tool's own environment (never toolsmith's).
//!
//! An unset `${VAR}` expands to nothing, as in a shell; `${VAR:-default}`
//! uses `default` when `VAR` is unset or empty.
//! A `$` not followed by `{` is kept as it is, and the default is literal text
//! up to the first `}` (no nesting).

/// A parsed string with substitutions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expansion {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Var {
        name: String,
        default: Option<String>,
    },
}

/// Why a string's substitutions are malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// `${` without a closing `}`.
    #[error("`${{` at byte {offset} is never closed by `}}`")]
    Unclosed {
        /// Where the `${` starts.
        offset: usize,
    },
    /// `${...}` whose name is not a variable name.
    #[error("`${{{inner}}}` does not name a variable; expected ${{NAME}} or ${{NAME:-default}}")]
    BadName {
        /// What stands between the braces.
        inner: String,
    },
}

impl Expansion {
    pub(crate) fn parse(text: &str) -> Result<Expansion, ExpandError> {
        let mut parts = Vec::new();
        let mut rest = text;
        let mut offset = 0;
        while let Some(start) = rest.find("${") {
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_owned()));
            }
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(ExpandError::Unclosed {
                    offset: offset + start,
                });
            };
            let inner = &after[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((name, default)) => (name, Some(default.to_owned())),
                None => (inner, None),
            };
            if !crate::oob::is_identifier(name) {
                return Err(ExpandError::BadName {
                    inner: inner.to_owned(),
                });
            }
            parts.push(Part::Var {
                name: name.to_owned(),
                default,
            });
            let consumed = start + 2 + end + 1;
            offset += consumed;
            rest = &rest[consumed..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Expansion { parts })
    }

    /// The string with every variable looked up by `lookup`.
    pub(crate) fn expand(&self, lookup: &dyn Fn(&str) -> Option<String>) -> String {
        let mut expanded = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => expanded.push_str(text),
                Part::Var { name, default } => {
                    let value = lookup(name).filter(|value| default.is_none() || !value.is_empty());
                    match (value, default) {
                        (Some(value), _) => expanded.push_str(&value),
                        (None, Some(default)) => expanded.push_str(default),
                        (None, None) => {}
                    }
                }
            }
        }
        expanded
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::manifest::expand::Expansion;

    fn check(text: &str, expect: Result<&str, &str>) {
        let lookup = |name: &str| match name {
            "HOME" => Some("/home/ada".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let actual = Expansion::parse(text)
            .map(|expansion| expansion.expand(&lookup))
            .map_err(|error| error.to_string());
        assert_eq!(
            actual,
            expect.map(str::to_owned).map_err(str::to_owned),
            "{text:?}"
        );
    }

    #[test]
    fn plain_text() {
        check("/tmp/x", Ok("/tmp/x"));
        check("cost $5 and $HOME", Ok("cost $5 and $HOME"));
        check("", Ok(""));
    }

    #[test]
    fn variables() {
        check("${HOME}/src", Ok("/home/ada/src"));
        check("a${UNSET}b", Ok("ab"));
        check("${EMPTY}", Ok(""));
    }

    #[test]
    fn defaults() {
        check("${UNSET:-/opt}", Ok("/opt"));
        check("${EMPTY:-fallback}", Ok("fallback"));
        check("${HOME:-/opt}", Ok("/home/ada"));
        check("${UNSET:-}", Ok(""));
    }

    #[test]
    fn malformed() {
        check("x${HOME", Err("`${` at byte 1 is never closed by `}`"));
        check(
            "${1X}",
            Err("`${1X}` does not name a variable; expected ${NAME} or ${NAME:-default}"),
        );
        check(
            "${}",
            Err("`${}` does not name a variable; expected ${NAME} or ${NAME:-default}"),
        );
    }
}
