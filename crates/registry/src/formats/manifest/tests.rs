//! The manifest format's tests: parsing, errors and the command of a call.

use serde_json::{Value, json};

use crate::formats::manifest::frontmatter::parse;
use crate::name::ToolName;

/// Parses a manifest for the file `demo.md` with `frontmatter` and the
/// body `echo hi`; `Ok` holds the input schema, `Err` the error messages.
fn check(frontmatter: &str, expect: Result<Value, &str>) {
    let text = format!("---\n{frontmatter}---\necho hi\n");
    let actual = parse(&text, Some(&ToolName::new("demo").unwrap()))
        .map(|manifest| manifest.input_schema.as_json().clone())
        .map_err(|errors| errors.to_string());
    assert_eq!(actual, expect.map_err(str::to_owned), "{frontmatter}");
}

fn check_text(text: &str, expect: &str) {
    let actual = parse(text, Some(&ToolName::new("demo").unwrap()))
        .map(|_| ())
        .map_err(|errors| errors.to_string());
    assert_eq!(actual, Err(expect.to_owned()), "{text}");
}

const HEAD: &str = "name: demo\ndescription: A demo\n";

fn with_params(params: &str) -> String {
    format!("{HEAD}parameters:\n{params}")
}

#[test]
fn minimal() {
    check(HEAD, Ok(json!({"type": "object", "properties": {}})));
}

#[test]
fn schema_conversion() {
    check(
        &with_params(
            "  namespace:\n    type: string\n    required: true\n    description: The namespace\n    pattern: ^[a-z0-9-]+$\n    minLength: 1\n    maxLength: 63\n  count:\n    type: integer\n    min: 1\n    max: 10\n    default: 3\n  mode:\n    type: string\n    enum: [fast, slow]\n    default: fast\n  tags:\n    type: array\n    items: { type: string, enum: [a, b] }\n  any:\n    type: array\n",
        ),
        Ok(json!({
            "type": "object",
            "properties": {
                "namespace": {"type": "string", "description": "The namespace", "pattern": "^[a-z0-9-]+$", "minLength": 1, "maxLength": 63},
                "count": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                "any": {"type": "array", "items": {"type": ["string", "number", "boolean"]}}
            },
            "required": ["namespace"]
        })),
    );
}

#[test]
fn fences_and_yaml() {
    check_text(
        "name: demo\n",
        "the file must start with a `---` line opening the YAML frontmatter",
    );
    check_text(
        "---\nname: demo\n",
        "no `---` line closes the YAML frontmatter opened on line 1",
    );
    check_text(
        "---\nname: demo\ndescription: [unclosed\n---\necho\n",
        "frontmatter: invalid YAML at line 4, column 1: did not find expected ',' or ']' at line 4 column 1, while parsing a flow sequence",
    );
    check_text(
        "---\nname: a\nname: b\n---\necho\n",
        "frontmatter: invalid YAML at line 2, column 1: duplicate entry with key \"name\"",
    );
    check_text(
        "---\n- a\n---\necho\n",
        "frontmatter: expected a mapping of keys, got a list",
    );
}

#[test]
fn top_level_errors() {
    check("description: x\n", Err("name: missing"));
    check(
        "name: K8s\ndescription: x\n",
        Err("name: \"K8s\" does not match ^[a-z][a-z0-9_]*$"),
    );
    check(
        "name: k8s-pods\ndescription: x\n",
        Err("name: \"k8s-pods\" does not match ^[a-z][a-z0-9_]*$"),
    );
    check("name: demo\n", Err("description: missing"));
    check(
        "name: demo\ndescription: '  '\n",
        Err("description: must not be empty"),
    );
    check(
        "name: demo\ndescription: 5\n",
        Err("description: expected a string, got a number"),
    );
    check(
        &format!("{HEAD}approval: sometimes\n"),
        Err("approval: expected one of never, always, destructive, got \"sometimes\""),
    );
    check(
        &format!("{HEAD}read_only: yes\n"),
        Err("read_only: expected true or false, got a string"),
    );
    check(
        &format!("{HEAD}approval: destructive\nread_only: true\n"),
        Err("read_only: a tool with approval destructive cannot be read-only"),
    );
    check(
        &format!("{HEAD}timeout_ms: 400000\n"),
        Err("timeout_ms: 400000 exceeds the maximum of 300000"),
    );
    check(
        &format!("{HEAD}timeout_ms: 0\n"),
        Err("timeout_ms: must be at least 1"),
    );
    check(
        &format!("{HEAD}timeout_ms: 1.5\n"),
        Err("timeout_ms: expected a positive integer of milliseconds, got a number"),
    );
    check(
        &format!("{HEAD}shell: zsh\n"),
        Err("shell: expected one of bash, sh, got \"zsh\""),
    );
    check(
        &format!("{HEAD}fail_on_exit: 1\n"),
        Err("fail_on_exit: expected true or false, got a number"),
    );
    check(
        &format!("{HEAD}cwd: ${{HOME\n"),
        Err("cwd: invalid substitution: `${` at byte 0 is never closed by `}`"),
    );
    check(
        &format!("{HEAD}env:\n  1X: a\n"),
        Err("env.1X: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$"),
    );
    check(
        &format!("{HEAD}env:\n  A: [1]\n"),
        Err("env.A: expected a string, got a list"),
    );
    check(
        &format!("{HEAD}env:\n  A: ${{A-B}}\n"),
        Err(
            "env.A: invalid substitution: `${A-B}` does not name a variable; expected ${NAME} or ${NAME:-default}",
        ),
    );
}

#[test]
fn declared_tests() {
    let text = format!(
        "---\n{HEAD}tests:\n- name: greets\n  input: {{who: Ada}}\n  expect: {{result_contains: Ada}}\n---\necho hi\n"
    );
    let manifest = parse(&text, Some(&ToolName::new("demo").unwrap())).unwrap();
    assert_eq!(
        manifest
            .tests
            .iter()
            .map(|case| case.to_json())
            .collect::<Vec<_>>(),
        [json!({"name": "greets", "input": {"who": "Ada"}, "expect": {"result_contains": "Ada"}})]
    );
    check(
        &format!("{HEAD}tests: [{{input: 3}}]\n"),
        Err("tests: tests[0].input must be an object of arguments, not a number"),
    );
}

/// The warnings of the manifest `demo.md` (or of a file whose name makes no tool name, with
/// `None`) holding `frontmatter`; it must load.
fn check_warnings(file_name: Option<&str>, frontmatter: &str, expect: &[&str]) {
    let text = format!("---\n{frontmatter}---\necho hi\n");
    let file_name = file_name.map(|name| ToolName::new(name).unwrap());
    let manifest =
        parse(&text, file_name.as_ref()).unwrap_or_else(|errors| panic!("{frontmatter}: {errors}"));
    assert_eq!(manifest.warnings, expect, "{frontmatter}");
}

#[test]
fn unknown_top_level_keys_are_warnings_and_ignored() {
    // Issue 26: Nanocoder ignores keys it does not know (and has `subscribe:` blocks).
    check_warnings(
        Some("demo"),
        &format!("{HEAD}timeout: 5000\nsubscribe:\n  events: [file_changed]\n"),
        &[
            "timeout: unknown key (did you mean `timeout_ms`?); expected one of name, description, parameters, approval, read_only, timeout_ms, cwd, env, shell, fail_on_exit, output_schema, sandbox, tests; the key is ignored",
            "subscribe: unknown key; expected one of name, description, parameters, approval, read_only, timeout_ms, cwd, env, shell, fail_on_exit, output_schema, sandbox, tests; the key is ignored",
        ],
    );
    // Inside a parameter a misspelt constraint would silently loosen the schema: refused.
    check(
        &with_params("  n:\n    type: number\n    minimum: 1\n"),
        Err(
            "parameters.n.minimum: unknown key (did you mean `min`?); expected one of type, description, required, default, enum, pattern, minLength, maxLength, min, max, items",
        ),
    );
}

#[test]
fn the_frontmatter_name_names_the_tool() {
    // Issue 26: Nanocoder keys a tool by its `name`, whatever the file is called.
    check_warnings(
        Some("k8s_pods_tool"),
        "name: k8s_pods\ndescription: x\n",
        &[
            "name: the tool is \"k8s_pods\", as its frontmatter says; its file name would make it \"k8s_pods_tool\"",
        ],
    );
    check_warnings(
        None,
        "name: k8s_pods\ndescription: x\n",
        &[
            "name: the tool is \"k8s_pods\", as its frontmatter says; its file name makes no tool name",
        ],
    );
    check_warnings(Some("demo"), HEAD, &[]);
}

#[test]
fn declared_name() {
    use crate::formats::manifest::frontmatter::declared_name;
    let name = |text: &str| declared_name(text).map(|name| name.to_string());
    assert_eq!(
        name("---\nname: k8s_pods\n---\necho\n").as_deref(),
        Some("k8s_pods")
    );
    assert_eq!(
        name("---\nname: 'quoted'\n---\n").as_deref(),
        Some("quoted")
    );
    assert_eq!(name("---\nname: K8s\n---\n"), None);
    assert_eq!(name("---\nname: [a]\n---\n"), None);
    assert_eq!(name("---\ndescription: x\n---\n"), None);
    assert_eq!(name("name: x\n"), None);
    assert_eq!(
        name(&format!("---\nname: x\nd: {}\n---\n", "[".repeat(100))),
        None
    );
}

#[test]
fn parameters_as_a_list() {
    // Issue 26: Nanocoder's parser accepts a list of `{name, type, ...}` objects.
    check(
        &format!(
            "{HEAD}parameters:\n  - name: namespace\n    type: string\n    required: true\n  - name: count\n    type: integer\n    min: 1\n"
        ),
        Ok(json!({
            "type": "object",
            "properties": {
                "namespace": {"type": "string"},
                "count": {"type": "integer", "minimum": 1}
            },
            "required": ["namespace"]
        })),
    );
    check(
        &format!("{HEAD}parameters:\n  - type: string\n"),
        Err("parameters[0].name: missing"),
    );
    check(
        &format!("{HEAD}parameters:\n  - name: 3\n    type: string\n"),
        Err("parameters[0].name: expected a string, got a number"),
    );
    check(
        &format!("{HEAD}parameters:\n  - x\n"),
        Err("parameters[0]: expected a mapping of keys, got a string"),
    );
    check(
        &format!(
            "{HEAD}parameters:\n  - name: a\n    type: string\n  - name: a\n    type: integer\n"
        ),
        Err("parameters: \"a\" is declared twice"),
    );
    check(
        &format!("{HEAD}parameters:\n  - name: a\n    type: string\n    minimum: 1\n"),
        Err(
            "parameters.a.minimum: unknown key (did you mean `min`?); expected one of type, description, required, default, enum, pattern, minLength, maxLength, min, max, items",
        ),
    );
}

#[test]
fn parameter_errors() {
    check(&with_params("  n: {}\n"), Err("parameters.n.type: missing"));
    check(
        &with_params("  count:\n    type: float\n"),
        Err(
            "parameters.count.type: expected one of string, number, integer, boolean, array, got \"float\"",
        ),
    );
    check(
        &with_params("  n: string\n"),
        Err("parameters.n: expected a mapping of keys, got a string"),
    );
    check(
        &with_params("  my-param:\n    type: string\n"),
        Err("parameters.my-param: a parameter name must match ^[A-Za-z_][A-Za-z0-9_]*$"),
    );
    check(
        &with_params("  namespace:\n    type: integer\n    pattern: ^a$\n"),
        Err("parameters.namespace.pattern: only allowed for type string"),
    );
    check(
        &with_params("  n:\n    type: boolean\n    maxLength: 3\n"),
        Err("parameters.n.maxLength: only allowed for type string"),
    );
    check(
        &with_params("  n:\n    type: string\n    min: 3\n"),
        Err("parameters.n.min: only allowed for type number or integer"),
    );
    check(
        &with_params("  n:\n    type: string\n    items: {type: string}\n"),
        Err("parameters.n.items: only allowed for type array"),
    );
    check(
        &with_params("  n:\n    type: array\n    items: {type: array}\n"),
        Err("parameters.n.items.type: arrays of arrays are not supported"),
    );
    check(
        &with_params("  n:\n    type: array\n    enum: [a]\n"),
        Err(
            "parameters.n.enum: only allowed for type string, number, integer or boolean (for arrays, put it under items)",
        ),
    );
    check(
        &with_params("  n:\n    type: string\n    minLength: -1\n"),
        Err("parameters.n.minLength: expected a non-negative integer, got -1"),
    );
    check(
        &with_params("  n:\n    type: string\n    minLength: 5\n    maxLength: 2\n"),
        Err("parameters.n.minLength: 5 is greater than maxLength 2"),
    );
    check(
        &with_params("  n:\n    type: number\n    min: 10\n    max: 5\n"),
        Err("parameters.n.min: 10 is greater than max 5"),
    );
    check(
        &with_params("  n:\n    type: number\n    max: lots\n"),
        Err("parameters.n.max: expected a number, got a string"),
    );
    check(
        &with_params("  n:\n    type: string\n    pattern: '(['\n"),
        Err("parameters.n.pattern: invalid regular expression: \"([\" is not a \"regex\""),
    );
    check(
        &with_params("  n:\n    type: string\n    required: maybe\n"),
        Err("parameters.n.required: expected true or false, got a string"),
    );
}

#[test]
fn enum_and_default_errors() {
    check(
        &with_params("  n:\n    type: string\n    enum: []\n"),
        Err("parameters.n.enum: must list at least one value"),
    );
    check(
        &with_params("  n:\n    type: string\n    enum: a\n"),
        Err("parameters.n.enum: expected a list of values, got a string"),
    );
    check(
        &with_params("  n:\n    type: string\n    enum: [a, 3]\n"),
        Err("parameters.n.enum[1]: 3 is not of type string"),
    );
    check(
        &with_params("  n:\n    type: string\n    enum: [a, a]\n"),
        Err("parameters.n.enum[1]: \"a\" is listed twice"),
    );
    check(
        &with_params("  n:\n    type: string\n    pattern: ^[a-z]+$\n    enum: [ok, NO]\n"),
        Err("parameters.n.enum[1]: \"NO\" does not match \"^[a-z]+$\""),
    );
    check(
        &with_params("  n:\n    type: integer\n    default: 1.5\n"),
        Err("parameters.n.default: 1.5 is not of type integer"),
    );
    check(
        &with_params("  n:\n    type: string\n    enum: [a, b]\n    default: c\n"),
        Err("parameters.n.default: \"c\" is not one of the enum values"),
    );
    check(
        &with_params("  n:\n    type: string\n    pattern: ^[0-9]+$\n    default: abc\n"),
        Err("parameters.n.default: \"abc\" does not match \"^[0-9]+$\""),
    );
    check(
        &with_params("  n:\n    type: integer\n    max: 5\n    default: 9\n"),
        Err("parameters.n.default: 9 is greater than the maximum of 5"),
    );
    check(
        &with_params("  n:\n    type: array\n    items: {type: integer}\n    default: [1, x]\n"),
        Err("parameters.n.default: \"x\" is not of type \"integer\" (at /1)"),
    );
    check(
        &with_params("  n:\n    type: string\n    required: true\n    default: a\n"),
        Err("parameters.n.default: a required parameter cannot have a default"),
    );
}

#[test]
fn body_errors() {
    check_text(
        "---\nname: demo\ndescription: x\n---\n\n  \n",
        "body: empty; the body is the shell script the tool runs",
    );
    check_text(
        "---\nname: demo\ndescription: x\n---\necho\necho {{ nope }}\n",
        "body: line 6: {{ nope }} names no declared parameter",
    );
}

#[test]
fn every_error_is_reported() {
    check(
        "name: K8s\ntimeout_ms: 400000\nparameters:\n  n:\n    type: float\n",
        Err(
            "name: \"K8s\" does not match ^[a-z][a-z0-9_]*$; description: missing; parameters.n.type: expected one of string, number, integer, boolean, array, got \"float\"; timeout_ms: 400000 exceeds the maximum of 300000",
        ),
    );
}

#[test]
fn defaults_of_the_annotations() {
    let manifest = |extra: &str| {
        parse(
            &format!("---\n{HEAD}{extra}---\necho\n"),
            Some(&ToolName::new("demo").unwrap()),
        )
        .unwrap()
    };
    let plain = manifest("");
    assert_eq!(
        (plain.approval, plain.read_only),
        (crate::formats::annotations::Approval::Always, false)
    );
    assert_eq!(plain.timeout, std::time::Duration::from_millis(30_000));
    assert_eq!(plain.shell, None);
    assert!(!plain.fail_on_exit);
    let never = manifest("approval: never\n");
    assert!(never.read_only);
    let destructive = manifest("approval: destructive\n");
    assert!(!destructive.read_only);
    let explicit = manifest(
        "approval: never\nread_only: false\ntimeout_ms: 300000\nshell: sh\nfail_on_exit: true\n",
    );
    assert!(!explicit.read_only);
    assert_eq!(
        explicit.shell,
        Some(crate::formats::manifest::model::Shell::Sh)
    );
    assert!(explicit.fail_on_exit);
}

#[test]
fn defaults_are_applied_before_rendering() {
    let manifest = parse(
        "---\nname: demo\ndescription: x\nparameters:\n  n:\n    type: integer\n    default: 3\n  s:\n    type: string\n---\nhead -n {{ n }}{{# s }} {{ s }}{{/ s }}\n",
        Some(&ToolName::new("demo").unwrap()),
    )
    .unwrap();
    let render = |arguments: Value| {
        manifest
            .body
            .render(&manifest.with_defaults(&arguments), &|_| false)
    };
    assert_eq!(render(json!({})), "head -n \"${TOOLSMITH_ARG_n}\"\n");
    assert_eq!(
        render(json!({"n": 5, "s": "f"})),
        "head -n \"${TOOLSMITH_ARG_n}\" \"${TOOLSMITH_ARG_s}\"\n"
    );
    assert_eq!(
        render(json!({"n": null, "extra": 1})),
        "head -n \"${TOOLSMITH_ARG_n}\"\n"
    );
}

/// Issue 24: deep flow nesting in a frontmatter took the YAML parser time in the square of
/// its depth; it is refused before parsing, in one pass.
#[test]
fn deep_frontmatter_nesting_is_refused() {
    let deep = format!("{HEAD}x: {}{}\n", "[".repeat(65), "]".repeat(65));
    let error = parse(
        &format!("---\n{deep}---\necho hi\n"),
        Some(&ToolName::new("demo").unwrap()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("frontmatter: line 4 nests deeper than 64 levels of [ ] and { }"),
        "{error}"
    );
    let blocks = format!("{HEAD}x: {}a\n", "- ".repeat(300));
    assert!(
        parse(
            &format!("---\n{blocks}---\necho hi\n"),
            Some(&ToolName::new("demo").unwrap())
        )
        .is_err()
    );
    // Brackets in quotes and comments are not nesting.
    let quoted = format!(
        "{HEAD}parameters: {{}} # {}\nx: '{}'\n",
        "[".repeat(100),
        "{".repeat(100)
    );
    let parsed = parse(
        &format!("---\n{quoted}---\necho hi\n"),
        Some(&ToolName::new("demo").unwrap()),
    );
    assert!(
        parsed
            .as_ref()
            .err()
            .is_none_or(|errors| !errors.to_string().contains("nests deeper")),
        "{parsed:?}"
    );
}

/// Issue 24: a body of deeply nested substitutions, or one command of very many words, made
/// the scan of the body quadratic; both are refused at a bound, in linear time.
#[test]
fn deep_or_long_bodies_are_refused_quickly() {
    let deep = format!(
        "---\n{HEAD}---\necho {}true{}\n",
        "$(".repeat(20_000),
        ")".repeat(20_000)
    );
    let started = std::time::Instant::now();
    let error = parse(&deep, Some(&ToolName::new("demo").unwrap()))
        .unwrap_err()
        .to_string();
    assert!(error.contains("nest deeper than 64"), "{error}");
    let long = format!("---\n{HEAD}---\necho {}\n", "a ".repeat(100_000));
    let error = parse(&long, Some(&ToolName::new("demo").unwrap()))
        .unwrap_err()
        .to_string();
    assert!(error.contains("more than 4096 words"), "{error}");
    // A liveness bound: the quadratic scan took minutes on these.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
