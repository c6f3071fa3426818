//! Rendering a [`Request`] into a tool file with the tera templates of `templates/` (embedded, overridable), escaping every request string for the language it lands in.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};
use tera::Tera;

use crate::{Error, Language, Request};

/// The templates compiled into the binary, by name.
pub const EMBEDDED_TEMPLATES: [(&str, &str); 3] = [
    (
        "python.tera",
        include_str!("../../../templates/python.tera"),
    ),
    ("bash.tera", include_str!("../../../templates/bash.tera")),
    (
        "manifest.tera",
        include_str!("../../../templates/manifest.tera"),
    ),
];

/// A rendered tool: its file name and contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedTool {
    /// The file's name in the tools directory (`NAME` or `NAME.md`).
    pub file_name: String,
    /// The file's contents.
    pub contents: String,
    /// Whether the file must be executable (Kodelet tools are; manifests are not).
    pub executable: bool,
}

/// The templates: the embedded ones, each replaced by a file of the same name in
/// `override_dir` when there is one.
pub fn templates(override_dir: Option<&Path>) -> Result<Tera, Error> {
    compile(override_dir, &EMBEDDED_TEMPLATES)
}

/// The one template `language` renders with (see [`templates`]): a request compiles only
/// its own, so that it neither waits for the others nor fails on another's override. An
/// embedded template is compiled once per process (a server generates many tools); an
/// overriding file is read and compiled at every request, since it may have changed.
pub(crate) fn template_of(
    override_dir: Option<&Path>,
    language: Language,
) -> Result<Arc<Tera>, Error> {
    static EMBEDDED: [OnceLock<Arc<Tera>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let wanted: Vec<(&str, &str)> = EMBEDDED_TEMPLATES
        .into_iter()
        .filter(|(name, _)| *name == language.template())
        .collect();
    let overridden = override_dir.is_some_and(|dir| dir.join(language.template()).is_file());
    if overridden {
        return compile(override_dir, &wanted).map(Arc::new);
    }
    let cell = match language {
        Language::Python => &EMBEDDED[0],
        Language::Bash => &EMBEDDED[1],
        Language::Manifest => &EMBEDDED[2],
    };
    if let Some(tera) = cell.get() {
        return Ok(Arc::clone(tera));
    }
    let tera = Arc::new(compile(None, &wanted)?);
    // Two requests may compile it at once; either result is the same template.
    Ok(Arc::clone(cell.get_or_init(|| tera)))
}

fn compile(override_dir: Option<&Path>, embedded: &[(&str, &str)]) -> Result<Tera, Error> {
    let mut tera = Tera::default();
    tera.autoescape_on(Vec::new());
    for &(name, embedded) in embedded {
        let overriding = override_dir
            .map(|dir| dir.join(name))
            .filter(|path| path.is_file());
        let text = match &overriding {
            Some(path) => std::fs::read_to_string(path).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?,
            None => embedded.to_owned(),
        };
        tera.add_raw_template(name, &text)
            .map_err(|source| Error::Template {
                name: name.to_owned(),
                path: overriding.clone(),
                message: toolsmith_registry::error_chain(&source),
            })?;
    }
    tera.register_filter("python_str", python_str);
    tera.register_filter("shell_quote", shell_quote);
    Ok(tera)
}

/// Renders `request` with `implementation` as the logic.
pub fn render(tera: &Tera, request: &Request, implementation: &str) -> Result<RenderedTool, Error> {
    let language = request.language;
    let mut context = tera::Context::new();
    context.insert("name", request.name.as_str());
    context.insert("timeout", &format!("{}s", request.timeout_seconds));
    match language {
        Language::Python => {
            context.insert("description_json", &description_json(request));
            context.insert("implementation", &python_body(implementation));
        }
        Language::Bash => {
            context.insert("description_json", &description_json(request));
            let parameters: Vec<Value> = request.parameters.iter().map(bash_parameter).collect();
            context.insert("parameters", &parameters);
            context.insert("implementation", implementation.trim_end());
        }
        Language::Manifest => {
            context.insert("frontmatter", &frontmatter(request)?);
            context.insert("implementation", implementation.trim_end());
        }
    }
    let contents = tera
        .render(language.template(), &context)
        .map_err(|source| Error::Template {
            name: language.template().to_owned(),
            path: None,
            message: toolsmith_registry::error_chain(&source),
        })?;
    Ok(RenderedTool {
        file_name: language.file_name(&request.name),
        contents,
        executable: language != Language::Manifest,
    })
}

/// What a rendered executable answers its Kodelet probes, `description` and `config`, for
/// the pipeline to check the tool they describe before anything probes the file, then to
/// compare it with what discovery loads from the final file (`None` for a manifest, which is
/// read, not run). The embedded templates print exactly these (a test of the pipeline runs
/// both probes to compare); the pipeline never assumes it of an overriding template.
pub(crate) fn kodelet_answers(request: &Request) -> Option<(String, String)> {
    match request.language {
        Language::Python | Language::Bash => Some((
            description_json(request),
            serde_json::json!({"timeout": format!("{}s", request.timeout_seconds)}).to_string(),
        )),
        Language::Manifest => None,
    }
}

/// The description JSON of a Kodelet tool (what `tool description` prints): every
/// request string is inside it, and the templates embed it as one escaped literal.
fn description_json(request: &Request) -> String {
    let mut description = Map::new();
    description.insert("name".to_owned(), Value::from(request.name.as_str()));
    description.insert(
        "description".to_owned(),
        Value::from(request.full_description()),
    );
    description.insert("input_schema".to_owned(), request.input_schema());
    if let Some(output_schema) = &request.output_schema {
        description.insert("output_schema".to_owned(), output_schema.clone());
    }
    if !request.tests.is_empty() {
        description.insert(
            "tests".to_owned(),
            Value::Array(request.tests.iter().map(|case| case.to_json()).collect()),
        );
    }
    description.insert("sandbox".to_owned(), request.sandbox());
    description.insert("category".to_owned(), Value::from(request.category.clone()));
    // The templates read their arguments from TOOLSMITH_ARG_<name> when toolsmith passes
    // them so (TOOLSMITH_ARGS=env), instead of parsing stdin.
    description.insert("env_arguments".to_owned(), Value::Bool(true));
    Value::Object(description).to_string()
}

/// What the bash template needs of a parameter: its names, whether it is required, its
/// default as the text the registry would pass (a string as is, any other value as compact
/// JSON), and the check of its type when the tool is run by hand.
fn bash_parameter(parameter: &crate::Parameter) -> Value {
    let default = parameter.schema.get("default").map(|value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    });
    let (check, check_text) = match parameter.kind.as_str() {
        "integer" => ("integer", "an integer"),
        "number" => ("number", "a number"),
        "boolean" => ("boolean", "true or false"),
        _ => ("", ""),
    };
    serde_json::json!({
        "name": parameter.name,
        "variable": parameter.name.to_ascii_uppercase(),
        "required": parameter.required,
        "has_default": default.is_some(),
        "default": default.unwrap_or_default(),
        "check": check,
        "check_text": check_text,
    })
}

/// The YAML frontmatter of a manifest, serialized (so quoted) by the YAML library.
fn frontmatter(request: &Request) -> Result<String, Error> {
    let mut parameters = Map::new();
    for parameter in &request.parameters {
        let mut spec = Map::new();
        for (key, value) in &parameter.schema {
            let key = match key.as_str() {
                "minimum" => "min",
                "maximum" => "max",
                other => other,
            };
            if key == "items"
                && *value == serde_json::json!({"type": ["string", "number", "boolean"]})
            {
                continue;
            }
            spec.insert(key.to_owned(), value.clone());
        }
        if parameter.required {
            spec.insert("required".to_owned(), Value::Bool(true));
        }
        parameters.insert(parameter.name.clone(), Value::Object(spec));
    }
    let mut frontmatter = Map::new();
    frontmatter.insert("name".to_owned(), Value::from(request.name.as_str()));
    frontmatter.insert(
        "description".to_owned(),
        Value::from(request.full_description()),
    );
    if !parameters.is_empty() {
        frontmatter.insert("parameters".to_owned(), Value::Object(parameters));
    }
    frontmatter.insert(
        "timeout_ms".to_owned(),
        Value::from(request.timeout_seconds * 1000),
    );
    frontmatter.insert("shell".to_owned(), Value::from("bash"));
    frontmatter.insert("fail_on_exit".to_owned(), Value::Bool(true));
    if let Some(output_schema) = &request.output_schema {
        frontmatter.insert("output_schema".to_owned(), output_schema.clone());
    }
    if !request.tests.is_empty() {
        frontmatter.insert(
            "tests".to_owned(),
            Value::Array(request.tests.iter().map(|case| case.to_json()).collect()),
        );
    }
    frontmatter.insert("sandbox".to_owned(), request.sandbox());
    serde_norway::to_string(&Value::Object(frontmatter)).map_err(|source| Error::Yaml {
        message: source.to_string(),
    })
}

/// The body of `def run(args: dict)`: the request's lines, dedented by their common
/// indentation and indented by four spaces.
fn python_body(implementation: &str) -> String {
    let lines: Vec<&str> = implementation.trim_end().lines().collect();
    let common = lines
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let body: Vec<String> = lines
        .iter()
        .map(|line| {
            if line.trim().is_empty() {
                String::new()
            } else {
                format!("    {}", &line[common.min(line.len())..])
            }
        })
        .collect();
    if body.iter().all(String::is_empty) {
        return "    pass".to_owned();
    }
    body.join("\n")
}

/// Filter: a Python string literal of the text. A JSON string literal is one (same
/// escapes, UTF-8 source), and no character of the text can end it early.
fn python_str(value: &Value, _: &HashMap<String, Value>) -> tera::Result<Value> {
    let text = value
        .as_str()
        .ok_or_else(|| tera::Error::msg("python_str takes a string"))?;
    Ok(Value::from(serde_json::to_string(text)?))
}

/// Filter: a single-quoted shell word of the text (`'` becomes `'\''`).
fn shell_quote(value: &Value, _: &HashMap<String, Value>) -> tera::Result<Value> {
    let text = value
        .as_str()
        .ok_or_else(|| tera::Error::msg("shell_quote takes a string"))?;
    Ok(Value::from(format!("'{}'", text.replace('\'', "'\\''"))))
}

/// Where a user's templates override the embedded ones: `<home>/templates`.
pub fn override_dir(toolsmith_home: &Path) -> PathBuf {
    toolsmith_home.join("templates")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(request: Value, implementation: &str, expect: &str) {
        let request = Request::from_json(&request).unwrap();
        let tera = templates(None).unwrap();
        let rendered = render(&tera, &request, implementation).unwrap();
        assert_eq!(rendered.contents, expect);
    }

    #[test]
    fn manifest_snapshot() {
        check(
            json!({"name": "greet", "description": "Says hi.", "language": "manifest",
                   "parameters": {"who": "Whom to greet"}, "tests": [{"input": {"who": "Ada"}, "expect": {"result": "hi Ada"}}]}),
            "echo hi {{ who }}\n",
            "---\nname: greet\ndescription: Says hi.\nparameters:\n  who:\n    type: string\n    description: Whom to greet\n    required: true\ntimeout_ms: 30000\nshell: bash\nfail_on_exit: true\ntests:\n- input:\n    who: Ada\n  expect:\n    result: hi Ada\nsandbox:\n  network: deny\n  filesystem: read-only\n---\necho hi {{ who }}\n",
        );
    }

    #[test]
    fn python_body_is_dedented_then_indented() {
        assert_eq!(
            python_body("  x = 1\n\n  return x\n"),
            "    x = 1\n\n    return x"
        );
        assert_eq!(python_body("\n"), "    pass");
    }

    #[test]
    fn quoting_filters() {
        let none = HashMap::new();
        assert_eq!(
            shell_quote(&json!("it's $(x)"), &none).unwrap(),
            json!("'it'\\''s $(x)'")
        );
        assert_eq!(
            python_str(&json!("a\"b\\\n\"\"\"'"), &none).unwrap(),
            json!("\"a\\\"b\\\\\\n\\\"\\\"\\\"'\"")
        );
    }
}
