//! What a tool declares about itself for policy and agents: its [`Annotations`], with the
//! [`Approval`] a call needs.

use serde_json::{Map, Value};

use crate::schema::json_type;

/// Whether a call needs a human's approval, as the tool declares it.
///
/// toolsmith does not prompt anyone: it carries the annotation to agents
/// (MCP annotations) and uses it in profiles (`unattended` leaves out the
/// tools that need approval).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Approval {
    /// Never needs approval.
    Never,
    /// Always needs approval.
    Always,
    /// Needs approval because it changes things that are hard to undo.
    Destructive,
}

impl Approval {
    /// The name used in manifests and listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Never => "never",
            Approval::Always => "always",
            Approval::Destructive => "destructive",
        }
    }
}

/// What a tool declares about itself for policy and for agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotations {
    /// A human-readable title, if the tool gives one.
    pub title: Option<String>,
    /// Whether calls need approval.
    pub approval: Approval,
    /// True when the tool only reads: it changes nothing outside its own process.
    pub read_only: bool,
    /// True when the tool declared its approval (a manifest always does, by its default;
    /// an executable when its description says `approval`), so that `approval` is the tool's
    /// word and not toolsmith's assumption.
    pub declared: bool,
}

impl Annotations {
    /// The annotations of a tool that declares none: the executable formats
    /// come from systems without an approval step, so their tools run
    /// without one, and nothing is assumed about what they change.
    pub fn undeclared() -> Annotations {
        Annotations {
            title: None,
            approval: Approval::Never,
            read_only: false,
            declared: false,
        }
    }

    /// The annotations an executable declares in its description (Kodelet) or schema
    /// (ikigai), taken out of `object`: `approval` (`never`, `always` or `destructive`) and
    /// `read_only` (true or false), as a manifest declares them. What the executable leaves
    /// out stays as [`Annotations::undeclared`] has it: no approval, not read-only (an
    /// executable may do anything, so it is read-only only when it says so).
    pub(crate) fn from_executable(
        object: &mut Map<String, Value>,
    ) -> Result<Annotations, AnnotationsError> {
        let mut annotations = Annotations::undeclared();
        match object.remove("approval") {
            None | Some(Value::Null) => {}
            Some(Value::String(word)) => {
                annotations.approval = match word.as_str() {
                    "never" => Approval::Never,
                    "always" => Approval::Always,
                    "destructive" => Approval::Destructive,
                    _ => return Err(AnnotationsError::UnknownApproval { got: word }),
                };
                annotations.declared = true;
            }
            Some(other) => {
                return Err(AnnotationsError::WrongType {
                    field: "approval",
                    expected: "\"never\", \"always\" or \"destructive\"",
                    found: json_type(&other),
                });
            }
        }
        match object.remove("read_only") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(read_only)) => annotations.read_only = read_only,
            Some(other) => {
                return Err(AnnotationsError::WrongType {
                    field: "read_only",
                    expected: "true or false",
                    found: json_type(&other),
                });
            }
        }
        if annotations.read_only && annotations.approval == Approval::Destructive {
            return Err(AnnotationsError::DestructiveReadOnly);
        }
        Ok(annotations)
    }
}

/// Why an executable's annotations were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationsError {
    /// A field has the wrong JSON type.
    #[error("field `{field}` must be {expected}, not {found}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// The JSON type it has.
        found: &'static str,
    },
    /// `approval` is a word other than the three.
    #[error("field `approval` must be \"never\", \"always\" or \"destructive\", not {got:?}")]
    UnknownApproval {
        /// The word given.
        got: String,
    },
    /// `read_only: true` with `approval: destructive`.
    #[error("field `read_only`: a tool with approval destructive cannot be read-only")]
    DestructiveReadOnly,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Annotations, Approval};

    fn parse(value: Value) -> Result<Annotations, String> {
        let Value::Object(mut object) = value else {
            panic!("an object");
        };
        Annotations::from_executable(&mut object).map_err(|error| error.to_string())
    }

    #[test]
    fn executables_declare_approval_and_read_only_as_manifests_do() {
        assert_eq!(parse(json!({})), Ok(Annotations::undeclared()));
        let read_only = parse(json!({"read_only": true})).unwrap();
        assert!(read_only.read_only && !read_only.declared);
        assert_eq!(read_only.approval, Approval::Never);
        let destructive = parse(json!({"approval": "destructive"})).unwrap();
        assert_eq!(destructive.approval, Approval::Destructive);
        assert!(destructive.declared && !destructive.read_only);
        assert_eq!(
            parse(json!({"approval": "destructive", "read_only": true})),
            Err(
                "field `read_only`: a tool with approval destructive cannot be read-only"
                    .to_owned()
            )
        );
        assert_eq!(
            parse(json!({"approval": "sometimes"})),
            Err("field `approval` must be \"never\", \"always\" or \"destructive\", not \"sometimes\"".to_owned())
        );
        assert_eq!(
            parse(json!({"read_only": "yes"})),
            Err("field `read_only` must be true or false, not a string".to_owned())
        );
    }
}
