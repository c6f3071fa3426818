//! Out-of-band arguments: each validated top-level argument handed to the tool in its own environment variable (`TOOLSMITH_ARG_<name>`), or in a file when it is large, so that no value ever has to be spliced into code.
//!
//! Manifests always receive their arguments this way (their tags render as
//! quoted references to these variables), and executables that declare
//! `"env_arguments": true` do too; the JSON arguments still arrive on stdin.
//! The layout of the variables is the protocol's (docs/protocol.md):
//! - `TOOLSMITH_ARGS=env` says the arguments were validated, with defaults filled in;
//! - `TOOLSMITH_ARG_<name>` holds the exact text of a string, the compact JSON
//!   text of any other value; an absent argument has no variable;
//! - a value over [`MAX_VARIABLE_BYTES`], or one that would take the variables
//!   past [`MAX_TOTAL_BYTES`] in all, goes to a file named by
//!   `TOOLSMITH_ARG_<name>_FILE` instead, in a directory removed after the call;
//! - for manifests only, each element of an array is also
//!   `TOOLSMITH_ITEM_<name>_<index>` (same fallback), so that a tag can expand
//!   to one word per element without any shell arrays.
//!
//! The environment is the one channel a value can take that no shell parses:
//! an argument vector would do for a program, but a manifest is a script, and
//! `"$VAR"` is the only reference that every POSIX shell expands without re-reading.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use serde_json::Value;

/// `TOOLSMITH_ARGS`: set to [`ARGS_ENV`] when the arguments are passed out of band.
pub(crate) const ARGS_VAR: &str = "TOOLSMITH_ARGS";

/// The value of [`ARGS_VAR`].
pub(crate) const ARGS_ENV: &str = "env";

/// The prefix of the variable of one argument: `TOOLSMITH_ARG_<name>`.
pub(crate) const ARG_VAR_PREFIX: &str = "TOOLSMITH_ARG_";

/// The prefix of the variable of one element of a manifest's array argument:
/// `TOOLSMITH_ITEM_<name>_<index>`.
pub(crate) const ITEM_VAR_PREFIX: &str = "TOOLSMITH_ITEM_";

/// The suffix of the variable that names the file of a large value.
pub(crate) const FILE_SUFFIX: &str = "_FILE";

/// The largest value passed in a variable; a larger one goes to a file.
pub(crate) const MAX_VARIABLE_BYTES: usize = 64 * 1024;

/// The most the argument variables may take in all (names and values); a value
/// that would go past it goes to a file.
pub(crate) const MAX_TOTAL_BYTES: usize = 1024 * 1024;

/// The most elements an array argument of a manifest may have: each becomes a variable of
/// its own (or a file, past [`MAX_TOTAL_BYTES`]), and a script that expands them all one
/// word each could not be passed to its shell beyond a few thousand anyway (one argument of
/// `execve` is at most 128 KiB).
pub(crate) const MAX_ITEMS: usize = 4096;

/// The most files the values of one call may take (past [`MAX_TOTAL_BYTES`] of variables,
/// each further value takes one): a call's arguments never make more than this much work on
/// the disk, however many small values they hold.
pub(crate) const MAX_FILES: usize = 1024;

/// Why a call's arguments cannot be passed out of band; the call is `INVALID_PARAMS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutOfBandError {
    /// The values past `MAX_TOTAL_BYTES` would take more than `MAX_FILES` files.
    #[error(
        "the arguments hold more values than fit in {MAX_TOTAL_BYTES} bytes of variables and {MAX_FILES} files"
    )]
    TooManyFiles,
    /// An array argument of a manifest has more elements than `MAX_ITEMS`.
    #[error(
        "argument `{name}` has {count} elements; a manifest's array argument may have at most {MAX_ITEMS}"
    )]
    TooManyItems {
        /// The argument.
        name: String,
        /// Its elements.
        count: usize,
    },
    /// A string holds a NUL character, which no environment variable can carry.
    #[error("argument `{name}` contains a NUL character, which cannot be passed to the tool")]
    Nul {
        /// The argument.
        name: String,
    },
}

/// The variables (and files) of one call, built by [`OutOfBand::new`].
///
/// The files live as long as this value: keep it until the run has ended.
#[derive(Debug)]
pub(crate) struct OutOfBand {
    vars: Vec<(OsString, OsString)>,
    /// The variables whose value went to a file, as `(variable, path)`:
    /// `TOOLSMITH_ARG_x` when `TOOLSMITH_ARG_x_FILE` was set.
    in_files: Vec<String>,
    /// The directory of the files, held only to be removed on drop, after the call.
    _files: Option<ArgumentFiles>,
}

/// Whether array elements get variables of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Items {
    /// Manifests: `TOOLSMITH_ITEM_<name>_<index>` for each element.
    PerElement,
    /// Executables: the array's JSON text only.
    JsonOnly,
}

/// Whether `name` can be an argument passed out of band: an identifier that does not
/// end in `_FILE` (a property `x_FILE` would pass for the file of `x`).
pub(crate) fn passable_name(name: &str) -> bool {
    is_identifier(name) && !name.ends_with(FILE_SUFFIX)
}

/// The variable of argument `name`.
pub(crate) fn arg_var(name: &str) -> String {
    format!("{ARG_VAR_PREFIX}{name}")
}

/// The variable of element `index` of array argument `name`.
pub(crate) fn item_var(name: &str, index: usize) -> String {
    format!("{ITEM_VAR_PREFIX}{name}_{index}")
}

/// Whether an inherited variable is toolsmith's own (`TOOLSMITH_*`): those are removed from
/// every call's environment, whatever `[env] allow` or `set` says, so that a tool never
/// mistakes the operator's variable for an argument (`TOOLSMITH_ARG_*`) and never receives
/// toolsmith's own settings and secrets (`TOOLSMITH_TOKEN`). The variables toolsmith gives a
/// call itself (arguments, the progress descriptor) are added after this filter.
pub(crate) fn is_toolsmith_var(name: &OsString) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(TOOLSMITH_VAR_PREFIX.as_bytes())
        || name == ARGS_VAR.as_bytes()
        || name.starts_with(ARG_VAR_PREFIX.as_bytes())
        || name.starts_with(ITEM_VAR_PREFIX.as_bytes())
}

/// The prefix of every variable toolsmith reads or gives: none of the operator's reaches a tool.
const TOOLSMITH_VAR_PREFIX: &str = "TOOLSMITH_";

/// A directory holding the files of large values, removed when dropped.
#[derive(Debug)]
struct ArgumentFiles {
    dir: PathBuf,
}

impl Drop for ArgumentFiles {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(path = %self.dir.display(), %error, "could not remove the directory of a call's argument files");
        }
    }
}

impl ArgumentFiles {
    /// A fresh directory under the system's temporary directory, with an unguessable
    /// name, that any uid may traverse but not list (the tool may run as another user).
    fn create() -> std::io::Result<ArgumentFiles> {
        let base = std::env::temp_dir();
        let mut attempts = 0;
        loop {
            let dir = base.join(format!(
                "toolsmith-args-{}-{:016x}",
                std::process::id(),
                random_u64()
            ));
            match std::fs::DirBuilder::new().mode(0o711).create(&dir) {
                Ok(()) => {
                    // The umask may have taken bits away.
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))?;
                    return Ok(ArgumentFiles { dir });
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && attempts < 8 => {
                    attempts += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    fn write(&self, variable: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        let path = self.dir.join(variable);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(&path)?;
        file.write_all(bytes)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444))?;
        Ok(path)
    }
}

/// 64 unpredictable bits for a directory name, from the kernel.
fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    let filled = std::fs::File::open("/dev/urandom")
        .and_then(|mut urandom| std::io::Read::read_exact(&mut urandom, &mut bytes));
    match filled {
        Ok(()) => u64::from_ne_bytes(bytes),
        // Without /dev/urandom the name is only unique: the directory still refuses listing.
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() as u64),
    }
}

/// The first property of an object schema's `properties` whose name cannot be passed out
/// of band, for the load-time check of a tool that asks for its arguments that way.
pub(crate) fn unpassable_property(schema: &Value) -> Option<&str> {
    schema
        .get("properties")?
        .as_object()?
        .keys()
        .map(String::as_str)
        .find(|name| !passable_name(name))
}

/// The text a variable holds for `value`: a string as it is, anything else as compact JSON.
pub(crate) fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Why the files of large values could not be written: a failure of the host, not of the call.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the file of argument variable `{variable}`")]
pub struct ArgumentFileError {
    /// The variable whose value was being written.
    pub variable: String,
    /// The system's error.
    #[source]
    pub source: std::io::Error,
}

/// Either error of [`OutOfBand::new`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrepareError {
    #[error(transparent)]
    Invalid(#[from] OutOfBandError),
    #[error(transparent)]
    File(#[from] ArgumentFileError),
}

impl OutOfBand {
    /// The variables for `arguments` (validated, defaults filled in).
    ///
    /// Arguments whose names cannot be variables (see [`passable_name`]) are left out:
    /// the tool still finds them in the JSON on stdin.
    pub(crate) fn new(arguments: &Value, items: Items) -> Result<OutOfBand, PrepareError> {
        check_items(arguments, items)?;
        let mut entries: Vec<(String, String)> = Vec::new();
        if let Some(object) = arguments.as_object() {
            for (name, value) in object {
                if !passable_name(name) {
                    continue;
                }
                let text = value_text(value);
                if text.contains('\0') {
                    return Err(OutOfBandError::Nul { name: name.clone() }.into());
                }
                entries.push((arg_var(name), text));
                if let (Items::PerElement, Value::Array(elements)) = (items, value) {
                    for (index, element) in elements.iter().enumerate() {
                        let text = value_text(element);
                        if text.contains('\0') {
                            return Err(OutOfBandError::Nul { name: name.clone() }.into());
                        }
                        entries.push((item_var(name, index), text));
                    }
                }
            }
        }
        let mut vars = vec![(OsString::from(ARGS_VAR), OsString::from(ARGS_ENV))];
        let mut in_files = Vec::new();
        let mut files: Option<ArgumentFiles> = None;
        let mut total = 0usize;
        for (variable, text) in entries {
            let size = variable.len() + 1 + text.len();
            if text.len() <= MAX_VARIABLE_BYTES && total + size <= MAX_TOTAL_BYTES {
                total += size;
                vars.push((OsString::from(variable), OsString::from(text)));
                continue;
            }
            if in_files.len() >= MAX_FILES {
                return Err(OutOfBandError::TooManyFiles.into());
            }
            let file_error = |source| ArgumentFileError {
                variable: variable.clone(),
                source,
            };
            let dir = match &files {
                Some(dir) => dir,
                None => files.insert(ArgumentFiles::create().map_err(file_error)?),
            };
            let path = dir.write(&variable, text.as_bytes()).map_err(file_error)?;
            vars.push((
                OsString::from(format!("{variable}{FILE_SUFFIX}")),
                path.into_os_string(),
            ));
            in_files.push(variable);
        }
        Ok(OutOfBand {
            vars,
            in_files,
            _files: files,
        })
    }

    /// The variables to add to the call's environment.
    pub(crate) fn vars(&self) -> &[(OsString, OsString)] {
        &self.vars
    }

    /// Whether `variable`'s value went to a file (`<variable>_FILE` is set instead).
    pub(crate) fn in_file(&self, variable: &str) -> bool {
        self.in_files.iter().any(|name| name == variable)
    }

    /// The directory of the files, if any value needed one.
    #[cfg(test)]
    fn files_dir(&self) -> Option<&std::path::Path> {
        self._files.as_ref().map(|files| files.dir.as_path())
    }
}

/// Refuses, before a variable is made or a file written, an array argument with more
/// elements than [`MAX_ITEMS`] when each element gets a variable: so a call writes at most
/// a bounded number of files, whatever its size.
fn check_items(arguments: &Value, items: Items) -> Result<(), OutOfBandError> {
    if items != Items::PerElement {
        return Ok(());
    }
    let Some(object) = arguments.as_object() else {
        return Ok(());
    };
    for (name, value) in object {
        if let Value::Array(elements) = value
            && passable_name(name)
            && elements.len() > MAX_ITEMS
        {
            return Err(OutOfBandError::TooManyItems {
                name: name.clone(),
                count: elements.len(),
            });
        }
    }
    Ok(())
}

/// `^[A-Za-z_][A-Za-z0-9_]*$`: what a parameter name may be, so the names whose
/// values can travel in variables.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|character| character.is_ascii_alphanumeric() || character == '_')
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use serde_json::{Value, json};

    use crate::oob::{
        ARG_VAR_PREFIX, Items, MAX_TOTAL_BYTES, MAX_VARIABLE_BYTES, OutOfBand, OutOfBandError,
        PrepareError,
    };

    fn vars(arguments: Value, items: Items) -> Vec<(String, String)> {
        OutOfBand::new(&arguments, items)
            .unwrap()
            .vars()
            .iter()
            .map(|(name, value)| {
                (
                    name.to_string_lossy().into_owned(),
                    value.to_string_lossy().into_owned(),
                )
            })
            .collect()
    }

    fn pairs(expect: &[(&str, &str)]) -> Vec<(String, String)> {
        expect
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn strings_as_they_are_others_as_json() {
        assert_eq!(
            vars(
                json!({"s": "a \"b\"\n", "n": 3, "f": 1.5, "b": true, "l": ["x", 2], "o": {"k": null}, "z": null}),
                Items::JsonOnly
            ),
            pairs(&[
                ("TOOLSMITH_ARGS", "env"),
                ("TOOLSMITH_ARG_s", "a \"b\"\n"),
                ("TOOLSMITH_ARG_n", "3"),
                ("TOOLSMITH_ARG_f", "1.5"),
                ("TOOLSMITH_ARG_b", "true"),
                ("TOOLSMITH_ARG_l", "[\"x\",2]"),
                ("TOOLSMITH_ARG_o", "{\"k\":null}"),
                ("TOOLSMITH_ARG_z", "null"),
            ])
        );
    }

    #[test]
    fn manifests_get_one_variable_per_element() {
        assert_eq!(
            vars(json!({"l": ["x y", 2]}), Items::PerElement),
            pairs(&[
                ("TOOLSMITH_ARGS", "env"),
                ("TOOLSMITH_ARG_l", "[\"x y\",2]"),
                ("TOOLSMITH_ITEM_l_0", "x y"),
                ("TOOLSMITH_ITEM_l_1", "2"),
            ])
        );
    }

    #[test]
    fn names_that_cannot_be_variables_are_left_out() {
        assert_eq!(
            vars(
                json!({"a-b": "1", "x_FILE": "/etc/shadow", "ok": "2"}),
                Items::JsonOnly
            ),
            pairs(&[("TOOLSMITH_ARGS", "env"), ("TOOLSMITH_ARG_ok", "2")])
        );
    }

    #[test]
    fn nul_is_refused() {
        for (arguments, items) in [
            (json!({"s": "a\u{0}b"}), Items::JsonOnly),
            (json!({"l": ["a\u{0}b"]}), Items::PerElement),
        ] {
            let error = OutOfBand::new(&arguments, items).unwrap_err();
            let PrepareError::Invalid(error) = error else {
                panic!("{error}")
            };
            let name = arguments
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap()
                .clone();
            assert_eq!(error, OutOfBandError::Nul { name });
        }
        // As JSON text, a NUL inside an array is `\u0000`: nothing to refuse.
        assert!(OutOfBand::new(&json!({"l": ["a\u{0}b"]}), Items::JsonOnly).is_ok());
    }

    #[test]
    fn large_values_go_to_files_that_are_removed() {
        let big = "x\n".repeat(MAX_VARIABLE_BYTES / 2) + "y";
        let exact = "z".repeat(MAX_VARIABLE_BYTES);
        let arguments = json!({"big": big, "exact": exact, "small": "s"});
        let out_of_band = OutOfBand::new(&arguments, Items::JsonOnly).unwrap();
        let dir = out_of_band.files_dir().unwrap().to_path_buf();
        let names: Vec<&OsString> = out_of_band.vars().iter().map(|(name, _)| name).collect();
        assert_eq!(
            names,
            [
                "TOOLSMITH_ARGS",
                "TOOLSMITH_ARG_big_FILE",
                "TOOLSMITH_ARG_exact",
                "TOOLSMITH_ARG_small"
            ]
        );
        assert!(out_of_band.in_file("TOOLSMITH_ARG_big"));
        assert!(!out_of_band.in_file("TOOLSMITH_ARG_exact"));
        let path = &out_of_band.vars()[1].1;
        assert_eq!(std::fs::read_to_string(path).unwrap(), big);
        use std::os::unix::fs::PermissionsExt;
        let mode =
            |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(std::path::Path::new(path)), 0o444);
        assert_eq!(mode(&dir), 0o711);
        drop(out_of_band);
        assert!(!dir.exists());
    }

    #[test]
    fn the_total_is_capped() {
        let value = "v".repeat(MAX_VARIABLE_BYTES - 100);
        let count = MAX_TOTAL_BYTES / MAX_VARIABLE_BYTES + 3;
        let arguments: serde_json::Map<String, Value> = (0..count)
            .map(|index| (format!("a{index:02}"), Value::from(value.clone())))
            .collect();
        let out_of_band = OutOfBand::new(&Value::Object(arguments), Items::JsonOnly).unwrap();
        let total: usize = out_of_band
            .vars()
            .iter()
            .filter(|(name, _)| !name.to_string_lossy().ends_with("_FILE"))
            .map(|(name, value)| name.len() + 1 + value.len())
            .sum();
        assert!(total <= MAX_TOTAL_BYTES + 20, "{total}");
        let in_files = out_of_band
            .vars()
            .iter()
            .filter(|(name, _)| name.to_string_lossy().ends_with("_FILE"))
            .count();
        assert_eq!(in_files, 3);
        assert!(
            out_of_band
                .vars()
                .iter()
                .all(|(name, _)| name == "TOOLSMITH_ARGS"
                    || name.to_string_lossy().starts_with(ARG_VAR_PREFIX))
        );
    }
}
