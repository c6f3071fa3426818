//! Manifest bodies: parsing `{{ name }}` tags and `{{# name }}…{{/ name }}` sections at load time, and rendering them into a shell script with every value quoted for the place it lands in.
//!
//! A tag is `{{`, optional spaces, an optional sigil (`#` section, `^` inverted
//! section, `/` end of section), optional spaces, a parameter name, optional
//! spaces and `}}`.
//! A `{{` whose content is not a parameter name and has no sigil (Go templates'
//! `{{.Name}}`, say) is copied verbatim; one with a sigil but no valid name is
//! an error, because it was clearly meant as a section.
//!
//! Quoting follows the shell: the body is scanned once at load time, and every
//! tag learns whether it stands outside quotes, inside `"…"`, inside `'…'` or
//! inside `$'…'`.
//! The value is then written so that the shell reads back exactly the value:
//! single-quoted outside quotes (`'` as `'\''`), backslash-escaped inside double
//! quotes, and by closing and reopening the quotes inside `'…'` and `$'…'`.
//! That keeps the proposal's `-l "{{ selector }}"` correct.
//! Command substitutions (`$(…)`, backticks) and comments are followed; a tag
//! inside a here-document is refused, because a here-document has no quoting
//! that survives a value containing its delimiter line.
//! A section must not change the quoting (open a quote it does not close), so
//! that a tag after it has the same context whether the section is rendered or
//! not.

use serde_json::Value;

use crate::formats::manifest::tag_context::{TagKind, contexts_of_tags};
use crate::oob::{arg_var, is_identifier, item_var};

/// A parsed body: text, tags and sections, checked against the declared parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    nodes: Vec<Node>,
    /// Second interpreters in the body, for `toolsmith validate`.
    warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Text(String),
    Value {
        name: String,
        context: Quoting,
    },
    Section {
        name: String,
        inverted: bool,
        children: Vec<Node>,
    },
}

/// Where in the shell's quoting a tag stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quoting {
    Unquoted,
    Double,
    Single,
    AnsiC,
    /// In a comment: rendered as outside quotes, and never run.
    Comment,
}

/// A character of the scanned body, or the place of the n-th tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    Char(char),
    Tag(usize),
}

/// A tag as written, for an error message: a line break inside the tag is shown as `\n`, so
/// the message stays on one line.
pub(crate) fn as_written(raw: &str) -> String {
    raw.replace('\r', "\\r").replace('\n', "\\n")
}

/// Why a body is not a valid template. Lines are lines of the manifest file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A tag names a parameter that is not declared.
    #[error("line {line}: {tag} names no declared parameter")]
    Undeclared {
        /// The tag as written.
        tag: String,
        /// Its line.
        line: usize,
    },
    /// A tag with a sigil has no valid parameter name.
    #[error("line {line}: malformed tag {tag}")]
    Malformed {
        /// The tag as written.
        tag: String,
        /// Its line.
        line: usize,
    },
    /// A `{{/ name }}` closes a different section than the innermost open one.
    #[error("line {line}: {tag} closes {{{{# {open} }}}} opened on line {open_line}")]
    Mismatched {
        /// The closing tag as written.
        tag: String,
        /// Its line.
        line: usize,
        /// The name of the innermost open section.
        open: String,
        /// Where that section was opened.
        open_line: usize,
    },
    /// A `{{/ name }}` with no open section.
    #[error("line {line}: {tag} closes no section")]
    StrayClose {
        /// The closing tag as written.
        tag: String,
        /// Its line.
        line: usize,
    },
    /// A section that is never closed.
    #[error("line {line}: {tag} is never closed")]
    Unclosed {
        /// The opening tag as written.
        tag: String,
        /// Its line.
        line: usize,
    },
    /// A section opens or closes a quote it does not also close or open.
    #[error(
        "line {line}: the section {tag} changes the shell quoting (it holds an unbalanced quote)"
    )]
    SectionQuoting {
        /// The opening tag as written.
        tag: String,
        /// Its line.
        line: usize,
    },
    /// A tag inside a here-document.
    #[error(
        "line {line}, column {column}: {tag} is inside a here-document, whose text the shell expands as a whole, and where a quoted delimiter would expand nothing; assign the value to a variable before the here-document (x={{{{ name }}}}) and use \"$x\" there"
    )]
    InHereDocument {
        /// The tag as written.
        tag: String,
        /// Its line.
        line: usize,
        /// Its column.
        column: usize,
    },
    /// A tag where no reference to its value is safe or exact.
    #[error("line {line}, column {column}: {tag} {reason}")]
    Refused {
        /// The tag as written.
        tag: String,
        /// Its line.
        line: usize,
        /// Its column.
        column: usize,
        /// Why, as a sentence fragment.
        reason: String,
    },
    /// The body ends inside a quote or command substitution.
    #[error("the body ends inside {what} opened on line {line}")]
    Unterminated {
        /// What is still open, e.g. `a double quote`.
        what: &'static str,
        /// Where it was opened.
        line: usize,
    },
    /// Quotes, substitutions, groups and expansions nest deeper than `MAX_SHELL_NESTING`.
    #[error("line {line}: quotes, substitutions and groups nest deeper than {MAX_SHELL_NESTING}")]
    TooDeep {
        /// Where the limit was passed.
        line: usize,
    },
    /// One simple command has more than `MAX_COMMAND_WORDS` words.
    #[error("line {line}: a command has more than {MAX_COMMAND_WORDS} words")]
    TooManyWords {
        /// Where the limit was passed.
        line: usize,
    },
}

/// How deep quotes, command substitutions, groups and expansions may nest in a manifest's
/// body: the scan of the body does work in proportion to the depth at each character.
pub(crate) const MAX_SHELL_NESTING: usize = 64;

/// How many words one simple command of a manifest's body may have: the scan looks at the
/// command's first words again at the end of each word.
pub(crate) const MAX_COMMAND_WORDS: usize = 4096;

/// One tag as found in the text, before nesting.
pub(crate) struct Tag<'a> {
    sigil: Option<char>,
    name: &'a str,
    pub(crate) raw: &'a str,
    pub(crate) line: usize,
    /// The column of `{{` in its line, counted in characters from 1.
    pub(crate) column: usize,
}

/// A flat token of the body.
enum Token<'a> {
    Text(&'a str),
    Tag(Tag<'a>),
}

impl Template {
    /// Parses `body`, whose first line is line `first_line` of the file; every
    /// tag must name one of `declared`, given with whether its type is integer or number.
    pub(crate) fn parse(
        body: &str,
        first_line: usize,
        declared: &[(&str, bool)],
    ) -> Result<Template, TemplateError> {
        let tokens = tokenize(body, first_line)?;
        let mut items = Vec::new();
        let mut tags = Vec::new();
        let mut kinds = Vec::new();
        for token in &tokens {
            match token {
                Token::Text(text) => items.extend(text.chars().map(Item::Char)),
                Token::Tag(tag) => {
                    let Some((_, numeric)) = declared.iter().find(|(name, _)| *name == tag.name)
                    else {
                        return Err(TemplateError::Undeclared {
                            tag: as_written(tag.raw),
                            line: tag.line,
                        });
                    };
                    items.push(Item::Tag(tags.len()));
                    tags.push(tag);
                    kinds.push(match (tag.sigil, numeric) {
                        (Some(_), _) => TagKind::Section,
                        (None, true) => TagKind::Numeric,
                        (None, false) => TagKind::Value,
                    });
                }
            }
        }
        let (contexts, warnings) = contexts_of_tags(&items, &tags, &kinds, first_line)?;
        let mut contexts = contexts.into_iter();
        let mut stack: Vec<Level<'_>> = vec![(Vec::new(), None)];
        for token in &tokens {
            match token {
                Token::Text(text) => push_node(&mut stack, Node::Text((*text).to_owned())),
                Token::Tag(tag) => {
                    // `contexts_of_tags` yields one context per tag, in order.
                    let context = contexts.next().unwrap_or(Quoting::Unquoted);
                    match tag.sigil {
                        None => push_node(
                            &mut stack,
                            Node::Value {
                                name: tag.name.to_owned(),
                                context,
                            },
                        ),
                        Some('/') => {
                            let Some((children, Some((open, open_context)))) = stack.pop() else {
                                return Err(TemplateError::StrayClose {
                                    tag: as_written(tag.raw),
                                    line: tag.line,
                                });
                            };
                            if open.name != tag.name {
                                return Err(TemplateError::Mismatched {
                                    tag: as_written(tag.raw),
                                    line: tag.line,
                                    open: open.name.to_owned(),
                                    open_line: open.line,
                                });
                            }
                            if open_context != context {
                                return Err(TemplateError::SectionQuoting {
                                    tag: as_written(open.raw),
                                    line: open.line,
                                });
                            }
                            push_node(
                                &mut stack,
                                Node::Section {
                                    name: open.name.to_owned(),
                                    inverted: open.sigil == Some('^'),
                                    children,
                                },
                            );
                        }
                        Some(_) => stack.push((Vec::new(), Some((tag, context)))),
                    }
                }
            }
        }
        let (nodes, open) = stack.pop().unwrap_or((Vec::new(), None));
        if let Some((open, _)) = open {
            return Err(TemplateError::Unclosed {
                tag: as_written(open.raw),
                line: open.line,
            });
        }
        Ok(Template { nodes, warnings })
    }

    /// Places where a value may still become code through a second interpreter (`eval`,
    /// `sh -c`, `source`, awk or python programs, a variable later evaluated as arithmetic),
    /// as `line N: …` sentences.
    pub(crate) fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Renders the body for `arguments` (an object, defaults already applied): every tag
    /// becomes a quoted reference to the argument's variable (see `oob.rs`), never its value.
    /// `in_file(variable)` says which variables come as a `_FILE` instead; a prelude loads
    /// them into the variable first, exactly (trailing newlines included), in sh and bash alike.
    pub(crate) fn render(&self, arguments: &Value, in_file: &dyn Fn(&str) -> bool) -> String {
        let mut body = String::new();
        let mut referenced = Vec::new();
        render_nodes(&self.nodes, arguments, &mut body, &mut referenced);
        let mut script = String::new();
        let mut loaded: Vec<&str> = Vec::new();
        for variable in &referenced {
            if in_file(variable) && !loaded.contains(&variable.as_str()) {
                loaded.push(variable);
                script.push_str(&load_from_file(variable));
            }
        }
        script.push_str(&body);
        script
    }
}

/// The line that loads `variable` from the file named by `<variable>_FILE`: command
/// substitution drops trailing newlines, so a sentinel `x` is appended and removed.
/// The variable is not exported: a value too large for the environment would make every
/// command the body starts fail with E2BIG.
fn load_from_file(variable: &str) -> String {
    format!(
        "{variable}=$(cat -- \"${{{variable}_FILE}}\" && printf x) || {{ printf 'toolsmith: cannot read %s\\n' \"${{{variable}_FILE}}\" >&2; exit 125; }}; {variable}=${{{variable}%x}}\n"
    )
}

/// One level of section nesting: the nodes so far, and the section's opening tag and quoting (none at the top).
type Level<'a> = (Vec<Node>, Option<(&'a Tag<'a>, Quoting)>);

fn push_node(stack: &mut [Level<'_>], node: Node) {
    if let Some((nodes, _)) = stack.last_mut() {
        nodes.push(node);
    }
}

fn render_nodes(
    nodes: &[Node],
    arguments: &Value,
    script: &mut String,
    referenced: &mut Vec<String>,
) {
    for node in nodes {
        match node {
            Node::Text(text) => script.push_str(text),
            Node::Value { name, context } => match arguments.get(name) {
                None | Some(Value::Null) => {}
                Some(value) => reference(name, value, *context, script, referenced),
            },
            Node::Section {
                name,
                inverted,
                children,
            } => {
                if truthy(arguments.get(name)) != *inverted {
                    render_nodes(children, arguments, script, referenced);
                }
            }
        }
    }
}

/// Whether a section over this value is rendered: present and not false, 0, "" or empty.
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(Value::Number(number)) => number.as_f64().is_some_and(|number| number != 0.0),
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(fields)) => !fields.is_empty(),
    }
}

/// Writes references to `value`'s variables so that the shell reads back one word per
/// element (one word for a scalar) in `context`; the value itself is never written.
fn reference(
    name: &str,
    value: &Value,
    context: Quoting,
    script: &mut String,
    referenced: &mut Vec<String>,
) {
    let variables: Vec<String> = match value {
        Value::Array(items) => (0..items.len())
            .map(|index| item_var(name, index))
            .collect(),
        _ => vec![arg_var(name)],
    };
    let unquoted = variables
        .iter()
        .map(|variable| format!("\"${{{variable}}}\""))
        .collect::<Vec<_>>()
        .join(" ");
    match context {
        Quoting::Unquoted | Quoting::Comment => script.push_str(&unquoted),
        Quoting::Double => {
            let references: Vec<String> = variables
                .iter()
                .map(|variable| format!("${{{variable}}}"))
                .collect();
            // Closing and reopening the double quotes between elements makes each its own word.
            script.push_str(&references.join("\" \""));
        }
        Quoting::Single => {
            script.push('\'');
            script.push_str(if variables.is_empty() {
                "''"
            } else {
                &unquoted
            });
            script.push('\'');
        }
        Quoting::AnsiC => {
            script.push('\'');
            script.push_str(if variables.is_empty() {
                "''"
            } else {
                &unquoted
            });
            script.push_str("$'");
        }
    }
    referenced.extend(variables);
}

/// Splits `body` into text and tags.
fn tokenize(body: &str, first_line: usize) -> Result<Vec<Token<'_>>, TemplateError> {
    let mut tokens = Vec::new();
    let mut rest = body;
    let mut line = first_line;
    let mut text_start = 0;
    let mut offset = 0;
    while let Some(open) = rest.find("{{") {
        let after_open = &rest[open + 2..];
        let Some(close) = after_open.find("}}") else {
            break;
        };
        let inner = &after_open[..close];
        let raw = &rest[open..open + 2 + close + 2];
        let tag_line = line + rest[..open].matches('\n').count();
        match parse_tag(inner) {
            TagShape::Tag { sigil, name } => {
                if offset + open > text_start {
                    tokens.push(Token::Text(&body[text_start..offset + open]));
                }
                let before = &body[..offset + open];
                let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
                tokens.push(Token::Tag(Tag {
                    sigil,
                    name,
                    raw,
                    line: tag_line,
                    column: before[line_start..].chars().count() + 1,
                }));
                let consumed = open + raw.len();
                line += rest[..consumed].matches('\n').count();
                offset += consumed;
                text_start = offset;
                rest = &rest[consumed..];
            }
            TagShape::Malformed => {
                return Err(TemplateError::Malformed {
                    tag: as_written(raw),
                    line: tag_line,
                });
            }
            TagShape::Literal => {
                let consumed = open + 2;
                line += rest[..consumed].matches('\n').count();
                offset += consumed;
                rest = &rest[consumed..];
            }
        }
    }
    if body.len() > text_start {
        tokens.push(Token::Text(&body[text_start..]));
    }
    Ok(tokens)
}

enum TagShape<'a> {
    Tag { sigil: Option<char>, name: &'a str },
    Malformed,
    Literal,
}

fn parse_tag(inner: &str) -> TagShape<'_> {
    let trimmed = inner.trim();
    let (sigil, name) = match trimmed.chars().next() {
        Some(sigil @ ('#' | '^' | '/')) => (Some(sigil), trimmed[1..].trim_start()),
        _ => (None, trimmed),
    };
    if is_identifier(name) {
        TagShape::Tag { sigil, name }
    } else if sigil.is_some() {
        TagShape::Malformed
    } else {
        TagShape::Literal
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::formats::manifest::render::Template;

    const DECLARED: &[(&str, bool)] = &[
        ("a", false),
        ("b", false),
        ("name", false),
        ("list", false),
        ("flag", false),
        ("count", true),
    ];

    /// Parses `body` (starting at line 1) and renders it with `arguments`, the variable of
    /// `name` coming as a file; load errors are compared as messages.
    fn check(body: &str, arguments: Value, expect: Result<&str, &str>) {
        let actual = Template::parse(body, 1, DECLARED)
            .map_err(|error| error.to_string())
            .map(|template| {
                template.render(&arguments, &|variable| variable == "TOOLSMITH_ARG_name")
            });
        assert_eq!(
            actual,
            expect.map(str::to_owned).map_err(str::to_owned),
            "{body:?}"
        );
    }

    const LOAD_NAME: &str = r#"TOOLSMITH_ARG_name=$(cat -- "${TOOLSMITH_ARG_name_FILE}" && printf x) || { printf 'toolsmith: cannot read %s\n' "${TOOLSMITH_ARG_name_FILE}" >&2; exit 125; }; TOOLSMITH_ARG_name=${TOOLSMITH_ARG_name%x}
"#;

    #[test]
    fn plain_text_is_kept() {
        check("echo hi\n", json!({}), Ok("echo hi\n"));
        check("", json!({}), Ok(""));
    }

    #[test]
    fn values_never_enter_the_script() {
        check(
            r#"echo {{ a }} "{{ a }}" '{{ a }}' $'{{ a }}'"#,
            json!({"a": "; rm -rf / `id` $(id) \n x"}),
            Ok(
                r#"echo "${TOOLSMITH_ARG_a}" "${TOOLSMITH_ARG_a}" ''"${TOOLSMITH_ARG_a}"'' $''"${TOOLSMITH_ARG_a}"$''"#,
            ),
        );
        check(
            "echo {{ count }}",
            json!({"count": 2.5}),
            Ok(r#"echo "${TOOLSMITH_ARG_count}""#),
        );
    }

    #[test]
    fn a_value_in_a_file_is_loaded_first() {
        check(
            "echo {{ name }} {{ name }}",
            json!({"name": "Ada"}),
            Ok(&format!(
                r#"{LOAD_NAME}echo "${{TOOLSMITH_ARG_name}}" "${{TOOLSMITH_ARG_name}}""#
            )),
        );
        check(
            "echo {{ a }}",
            json!({"a": "x", "name": "y"}),
            Ok(r#"echo "${TOOLSMITH_ARG_a}""#),
        );
    }

    #[test]
    fn absent_values_render_nothing() {
        check("echo {{ a }}.", json!({}), Ok("echo ."));
        check("echo {{ a }}.", json!({"a": null}), Ok("echo ."));
    }

    #[test]
    fn arrays_are_one_word_per_element() {
        check(
            "ls {{ list }}",
            json!({"list": ["a b", "c", 3]}),
            Ok(
                r#"ls "${TOOLSMITH_ITEM_list_0}" "${TOOLSMITH_ITEM_list_1}" "${TOOLSMITH_ITEM_list_2}""#,
            ),
        );
        check("ls {{ list }}", json!({"list": []}), Ok("ls "));
        check(
            r#"ls "{{ list }}""#,
            json!({"list": ["a b", "c"]}),
            Ok(r#"ls "${TOOLSMITH_ITEM_list_0}" "${TOOLSMITH_ITEM_list_1}""#),
        );
        check("ls '{{ list }}'", json!({"list": []}), Ok("ls ''''''"));
    }

    #[test]
    fn contexts_inside_expansions() {
        check(
            r#"echo "${X:-"{{ a }}"}" ${Y:-{{ a }}} "$(echo {{ a }})" `echo {{ a }}`"#,
            json!({"a": "v"}),
            Ok(
                r#"echo "${X:-"${TOOLSMITH_ARG_a}"}" ${Y:-"${TOOLSMITH_ARG_a}"} "$(echo "${TOOLSMITH_ARG_a}")" `echo "${TOOLSMITH_ARG_a}"`"#,
            ),
        );
        check(
            "# {{ a }} don't\necho '{{ a }}'",
            json!({"a": "v"}),
            Ok("# \"${TOOLSMITH_ARG_a}\" don't\necho ''\"${TOOLSMITH_ARG_a}\"''"),
        );
    }

    #[test]
    fn sections() {
        let body = "get{{# a }} -l {{ a }}{{/ a }}";
        check(
            body,
            json!({"a": "app"}),
            Ok(r#"get -l "${TOOLSMITH_ARG_a}""#),
        );
        check(body, json!({"a": ""}), Ok("get"));
        check(body, json!({}), Ok("get"));
        let inverted = "{{^ flag }}dry-run{{/ flag }}";
        check(inverted, json!({"flag": false}), Ok("dry-run"));
        check(inverted, json!({"flag": true}), Ok(""));
        check(inverted, json!({}), Ok("dry-run"));
        check("{{# count }}n{{/ count }}", json!({"count": 0}), Ok(""));
        check("{{# count }}n{{/ count }}", json!({"count": 0.5}), Ok("n"));
        check("{{# list }}l{{/ list }}", json!({"list": []}), Ok(""));
        check("{{# list }}l{{/ list }}", json!({"list": [""]}), Ok("l"));
        // A section carries no value: it may stand anywhere, arithmetic included.
        check(
            "echo $(( 1{{# a }} + 1{{/ a }} ))",
            json!({"a": "x"}),
            Ok("echo $(( 1 + 1 ))"),
        );
    }

    #[test]
    fn nested_sections() {
        let body = "{{# a }}A{{# b }}B{{/ b }}{{^ b }}!B{{/ b }}{{/ a }}.";
        check(body, json!({"a": "x", "b": "y"}), Ok("AB."));
        check(body, json!({"a": "x"}), Ok("A!B."));
        check(body, json!({"b": "y"}), Ok("."));
    }

    #[test]
    fn other_braces_are_literal() {
        check(
            "docker inspect -f '{{.State}}' {{ a }} {{ not a tag }}",
            json!({"a": "c"}),
            Ok(r#"docker inspect -f '{{.State}}' "${TOOLSMITH_ARG_a}" {{ not a tag }}"#),
        );
        check("echo {{ a", json!({"a": "c"}), Ok("echo {{ a"));
    }

    #[test]
    fn here_strings_are_words_and_here_documents_are_refused() {
        check(
            "cat <<< {{ a }}",
            json!({"a": "x"}),
            Ok(r#"cat <<< "${TOOLSMITH_ARG_a}""#),
        );
        check(
            "cat <<EOF\n$x\nEOF\necho {{ a }}",
            json!({"a": "y"}),
            Ok("cat <<EOF\n$x\nEOF\necho \"${TOOLSMITH_ARG_a}\""),
        );
        check(
            "cat <<-'E F'\n\tdon't\n\tE F\necho {{ a }}",
            json!({"a": "y"}),
            Ok("cat <<-'E F'\n\tdon't\n\tE F\necho \"${TOOLSMITH_ARG_a}\""),
        );
        check(
            "cat <<EOF\nhi {{ a }}\nEOF\n",
            json!({}),
            Err(
                r#"line 2, column 4: {{ a }} is inside a here-document, whose text the shell expands as a whole, and where a quoted delimiter would expand nothing; assign the value to a variable before the here-document (x={{ name }}) and use "$x" there"#,
            ),
        );
    }

    /// Where bash would evaluate a value: refused for a string, admitted for a number.
    #[test]
    fn evaluated_contexts() {
        let arithmetic = "stands in an arithmetic context";
        for (body, reason) in [
            ("echo $(( {{ a }} + 1 ))", arithmetic),
            ("(( {{ a }} ))", arithmetic),
            ("[[ {{ a }} -gt 0 ]]", arithmetic),
            ("[[ -v {{ a }} ]]", arithmetic),
            ("let x={{ a }}", arithmetic),
            ("declare -i x={{ a }}", arithmetic),
            (
                "printf -v {{ a }} %s x",
                "stands where bash expects a variable name (printf -v)",
            ),
            ("eval {{ a }}", "stands in text that is run as code (eval)"),
            ("echo \\{{ a }}", "follows a backslash"),
        ] {
            let error = Template::parse(body, 3, DECLARED).unwrap_err().to_string();
            assert!(error.starts_with("line 3, column "), "{body}: {error}");
            assert!(error.contains(reason), "{body}: {error}");
            let numeric = body.replace("{{ a }}", "{{ count }}");
            let admitted = Template::parse(&numeric, 3, DECLARED);
            assert_eq!(
                admitted.is_ok(),
                reason != "follows a backslash",
                "{numeric}"
            );
        }
        check(
            "x=1\n  echo $(( {{ a }} ))",
            json!({}),
            Err(
                "line 2, column 12: {{ a }} stands in an arithmetic context ($(( … ))), where bash evaluates the value as an expression and runs any $(…) in it; only integer and number parameters may stand there",
            ),
        );
    }

    #[test]
    fn load_errors() {
        check(
            "echo {{ nope }}",
            json!({}),
            Err("line 1: {{ nope }} names no declared parameter"),
        );
        check(
            "\n{{# a }}x",
            json!({}),
            Err("line 2: {{# a }} is never closed"),
        );
        check(
            "x{{/ a }}",
            json!({}),
            Err("line 1: {{/ a }} closes no section"),
        );
        check(
            "{{# a }}\n{{# b }}\n{{/ a }}{{/ b }}",
            json!({}),
            Err("line 3: {{/ a }} closes {{# b }} opened on line 2"),
        );
        check("{{# }}", json!({}), Err("line 1: malformed tag {{# }}"));
        check("{{/a-b}}", json!({}), Err("line 1: malformed tag {{/a-b}}"));
        check(
            "{{# a }}\"{{/ a }}\"",
            json!({}),
            Err(
                "line 1: the section {{# a }} changes the shell quoting (it holds an unbalanced quote)",
            ),
        );
        check(
            "echo \"abc\n",
            json!({}),
            Err("the body ends inside a double quote opened on line 1"),
        );
        check(
            "echo $(abc\n",
            json!({}),
            Err("the body ends inside a command substitution $( opened on line 1"),
        );
    }

    #[test]
    fn second_interpreters_are_warned_about() {
        let warnings = |body: &str| {
            Template::parse(body, 1, DECLARED)
                .unwrap()
                .warnings()
                .to_vec()
        };
        assert_eq!(
            warnings("echo {{ a }}\nx={{ a }}; echo \"$x\""),
            Vec::<String>::new()
        );
        let cases = [
            (
                "x=1\neval \"$cmd\"",
                "line 2: eval runs its arguments as code",
            ),
            (
                "bash -c 'echo \"$1\"' bash {{ a }}",
                "line 1: bash -c runs a second shell",
            ),
            (". ./lib.sh", "line 1: . runs a file as code"),
            (
                "awk -v x={{ a }} '{ print x }'",
                "line 1: awk receives a value",
            ),
            (
                "python3 -c 'import sys' {{ a }}",
                "line 1: python3 receives a value",
            ),
            (
                "x={{ a }}\necho $(( x + 1 ))",
                "line 2: variable x holds a value and is evaluated as arithmetic here",
            ),
            (
                "f() { local n={{ a }}; [[ $n -gt 0 ]]; }",
                "line 1: variable n holds a value and is evaluated as arithmetic here",
            ),
            ("y={{ a }}\nlet z=y+1", "line 2: variable y holds a value"),
        ];
        for (body, expect) in cases {
            let warnings = warnings(body);
            assert!(
                warnings.iter().any(|warning| warning.starts_with(expect)),
                "{body}: {warnings:?}"
            );
        }
        // A numeric parameter holds no code: no warning.
        assert_eq!(
            warnings("x={{ count }}\necho $(( x ))"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn lines_count_from_the_first_body_line() {
        let error = Template::parse("x\n{{ nope }}", 7, DECLARED).unwrap_err();
        assert_eq!(
            error.to_string(),
            "line 8: {{ nope }} names no declared parameter"
        );
    }

    /// The property test of the quoting: for any string without NUL (which no
    /// process argument can carry), in any quoting context, `sh` and `bash`
    /// receive exactly that string as one argument, and an array as one
    /// argument per element.
    ///
    /// Spawning two shells per string would take minutes on a small machine,
    /// so each proptest case renders one script for a batch of strings and
    /// runs it once per shell: 100 cases of 100 strings are 10 000 strings.
    mod quoting_property {
        use std::path::Path;

        use proptest::prelude::*;
        use serde_json::{Map, Value};

        use crate::formats::manifest::render::Template;
        use crate::oob::{Items, OutOfBand};

        const BATCH: usize = 100;
        const CASES: u32 = 100;

        /// Characters that mean something to a shell, drawn often so that
        /// they meet each other, plus any other character.
        fn word_char() -> impl Strategy<Value = char> {
            prop_oneof![
                3 => proptest::sample::select(vec![
                    '\'', '"', '\\', '$', '(', ')', '`', ';', '&', '|', '<', '>', '*', '?',
                    '[', ']', '{', '}', '~', '#', '!', '\n', '\t', ' ', '%', '=', '-', '\r',
                ]),
                2 => any::<char>().prop_filter("no process argument holds a NUL", |character| *character != '\0'),
            ]
        }

        fn word() -> impl Strategy<Value = String> {
            proptest::collection::vec(word_char(), 0..24)
                .prop_map(|characters| characters.into_iter().collect())
        }

        /// A shell function that prints its argument count, then each argument followed by NUL.
        const PRELUDE: &str = "f() { printf '%s\\n' \"$#\"; for a in \"$@\"; do printf '%s' \"$a\"; printf '\\000'; done; }\n";

        /// The body and the arguments per call that each line must produce.
        fn script(
            words: &[String],
            list: &[String],
        ) -> (String, Vec<Vec<String>>, Vec<String>, Value) {
            let mut body = String::from(PRELUDE);
            let mut expected = Vec::new();
            let mut arguments = Map::new();
            let mut names = Vec::new();
            for (index, word) in words.iter().enumerate() {
                let name = format!("w{index}");
                body.push_str(&format!("f {{{{ {name} }}}}\n"));
                body.push_str(&format!("f \"{{{{ {name} }}}}\"\n"));
                body.push_str(&format!(
                    "f 'x{{{{ {name} }}}}y' \"$(f {{{{ {name} }}}} >/dev/null; printf z)\"\n"
                ));
                expected.push(vec![word.clone()]);
                expected.push(vec![word.clone()]);
                expected.push(vec![format!("x{word}y"), "z".to_owned()]);
                arguments.insert(name.clone(), Value::String(word.clone()));
                names.push(name);
            }
            body.push_str("f {{ list }}\nf \"{{ list }}\"\n");
            expected.push(list.to_vec());
            expected.push(if list.is_empty() {
                vec![String::new()]
            } else {
                list.to_vec()
            });
            arguments.insert("list".to_owned(), Value::from(list.to_vec()));
            names.push("list".to_owned());
            (body, expected, names, Value::Object(arguments))
        }

        /// Parses what the `f` calls printed.
        fn parse_calls(mut output: &[u8]) -> Vec<Vec<String>> {
            let mut calls = Vec::new();
            while !output.is_empty() {
                let newline = output.iter().position(|byte| *byte == b'\n').unwrap();
                let count: usize = std::str::from_utf8(&output[..newline])
                    .unwrap()
                    .parse()
                    .unwrap();
                output = &output[newline + 1..];
                let mut call = Vec::new();
                for _ in 0..count {
                    let nul = output.iter().position(|byte| *byte == 0).unwrap();
                    call.push(String::from_utf8(output[..nul].to_vec()).unwrap());
                    output = &output[nul + 1..];
                }
                calls.push(call);
            }
            calls
        }

        fn run_shell(
            shell: &Path,
            script: &str,
            vars: &[(std::ffi::OsString, std::ffi::OsString)],
        ) -> Vec<Vec<String>> {
            #[expect(
                clippy::disallowed_methods,
                reason = "the property test runs each shell directly: thousands of scripts through the executor would need an executor per test and add nothing to what is tested"
            )]
            let output = std::process::Command::new(shell)
                .arg("-c")
                .arg(script)
                .arg("quoting")
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("LC_ALL", "C")
                .envs(vars.iter().map(|(name, value)| (name, value)))
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{} failed: {}",
                shell.display(),
                String::from_utf8_lossy(&output.stderr)
            );
            parse_calls(&output.stdout)
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

            #[test]
            fn shells_receive_exactly_the_value(
                words in proptest::collection::vec(word(), BATCH),
                list in proptest::collection::vec(word(), 0..4),
            ) {
                let (body, expected, names, arguments) = script(&words, &list);
                let declared: Vec<(&str, bool)> =
                    names.iter().map(|name| (name.as_str(), false)).collect();
                let template = Template::parse(&body, 1, &declared).unwrap();
                let out_of_band = OutOfBand::new(&arguments, Items::PerElement).unwrap();
                let rendered =
                    template.render(&arguments, &|variable| out_of_band.in_file(variable));
                for shell in ["/bin/sh", "/bin/bash"] {
                    let calls = run_shell(Path::new(shell), &rendered, out_of_band.vars());
                    prop_assert_eq!(&calls, &expected, "shell {}", shell);
                }
            }
        }
    }

    /// The differential test of issue 12: generated hostile values in generated contexts,
    /// each rendered manifest run under bash and under dash, and no marker file may ever
    /// appear. Contexts are compositions of word templates inside command templates; each
    /// composition is kept only if both shells accept its syntax (`-n`), so that a batch
    /// never stops early. Pairs are batched, one marker file per pair, so a failure names
    /// its value and context.
    mod differential {
        use std::path::Path;

        use serde_json::{Map, Value};

        use crate::formats::manifest::render::Template;
        use crate::oob::{Items, OutOfBand};

        /// Word templates: `@` is where the tag (or an inner template) goes.
        const WORDS: &[&str] = &[
            "@",
            "\"@\"",
            "'@'",
            "\"a@b\"",
            "a'b'@\"c\"",
            "\"$(echo @)\"",
            "$(echo @)",
            "\"`echo @`\"",
            "`echo @`",
            "\"${U:-@}\"",
            "${U:-@}",
            "\"${U:-\"@\"}\"",
            "${S#@}",
            "\"${S%@}\"",
            "${S:+@}",
            "\"$(printf '%s' \"@\")\"",
            "$( (echo @) )",
            "\"${U:-'@'}\"",
        ];

        /// Command templates: `W` is where a word goes.
        const COMMANDS: &[&str] = &[
            "echo W",
            "printf '%s\\n' W",
            "x=W; echo \"$x\"",
            "case W in *) echo c;; esac",
            "[ -n W ] && echo y",
            "echo W | cat",
            "f W",
            "echo W # W don't",
            "# W",
            ": W",
            "if [ W = x ]; then :; fi",
            "export E=W",
            "for i in W; do echo \"$i\"; done",
            "{ echo W; }",
            "(echo W)",
            "echo \"a\nb\"#' W'",
            "y=$(echo W)",
        ];

        /// Extra command templates for bash only.
        const BASH_COMMANDS: &[&str] = &[
            "[[ W == x ]] || :",
            "cat <<< W",
            "echo $'a\\'b' W",
            "a=(W); echo \"${a[0]}\"",
        ];

        const PAIRS: usize = 10_240;
        const BATCH: usize = 256;

        /// A small deterministic generator (xorshift64*), so a failure reproduces.
        struct Rng(u64);

        impl Rng {
            fn next(&mut self) -> u64 {
                self.0 ^= self.0 >> 12;
                self.0 ^= self.0 << 25;
                self.0 ^= self.0 >> 27;
                self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
            }

            fn below(&mut self, bound: usize) -> usize {
                (self.next() % bound as u64) as usize
            }

            fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
                choices[self.below(choices.len())]
            }
        }

        /// A hostile value whose every attempt to run code touches `marker`.
        fn value(rng: &mut Rng, marker: &str) -> String {
            const ATTACKS: &[&str] = &[
                "$(touch M)",
                "`touch M`",
                "a[$(touch M)]",
                "';touch M;'",
                "\";touch M;\"",
                "\ntouch M\n",
                "\\';touch M;#",
                "}\";touch M;#",
                "$(touch${IFS}M)",
                "x[$(touch M)]=1",
            ];
            const NOISE: &[&str] = &[
                "'", "\"", "\\", "\n", ";", "&", "|", "}", "{", ")", "(", "#", "$", " ", "*", "?",
                "~", "!", "`", "=", "-v", "\r", "é", "\u{2028}", "%s", "[", "]",
            ];
            let mut text = String::new();
            for _ in 0..rng.below(4) {
                text.push_str(rng.pick(NOISE));
            }
            text.push_str(&rng.pick(ATTACKS).replace('M', marker));
            for _ in 0..rng.below(4) {
                text.push_str(rng.pick(NOISE));
            }
            text
        }

        /// A context with `@` as its tag: a command around one or two nested words.
        fn context(rng: &mut Rng, bash: bool) -> String {
            let mut word = rng.pick(WORDS).to_owned();
            if rng.below(2) == 0 {
                word = word.replace('@', rng.pick(WORDS));
            }
            let command = if bash && rng.below(4) == 0 {
                rng.pick(BASH_COMMANDS)
            } else {
                rng.pick(COMMANDS)
            };
            command.replace('W', &word)
        }

        #[expect(
            clippy::disallowed_methods,
            reason = "the differential test runs each shell directly, thousands of times, as the quoting property test does"
        )]
        fn shell(program: &str) -> std::process::Command {
            let mut command = std::process::Command::new(program);
            command
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("LC_ALL", "C")
                .stdin(std::process::Stdio::null());
            command
        }

        fn syntax_ok(program: &str, script: &str) -> bool {
            shell(program)
                .arg("-n")
                .arg("-c")
                .arg(script)
                .output()
                .is_ok_and(|output| output.status.success())
        }

        fn run_batch(program: &str, dir: &Path, pairs: &[(String, String)]) -> Vec<String> {
            let mut body = String::from("S=s\nf() { printf '%s' \"$@\"; }\n");
            let mut arguments = Map::new();
            let mut declared = Vec::new();
            for (index, (context, value)) in pairs.iter().enumerate() {
                let name = format!("v{index}");
                body.push_str(&context.replace('@', &format!("{{{{ {name} }}}}")));
                body.push('\n');
                arguments.insert(name.clone(), Value::String(value.clone()));
                declared.push(name);
            }
            body.push_str("echo END\n");
            let declared: Vec<(&str, bool)> =
                declared.iter().map(|name| (name.as_str(), false)).collect();
            let template = match Template::parse(&body, 1, &declared) {
                Ok(template) => template,
                Err(error) => return vec![format!("{program}: batch refused: {error}")],
            };
            let arguments = Value::Object(arguments);
            let out_of_band = OutOfBand::new(&arguments, Items::PerElement).unwrap();
            let script = template.render(&arguments, &|variable| out_of_band.in_file(variable));
            let output = shell(program)
                .arg("-c")
                .arg(&script)
                .arg("differential")
                .envs(out_of_band.vars().iter().map(|(name, value)| (name, value)))
                .current_dir(dir)
                .output()
                .unwrap();
            let mut failures = Vec::new();
            if !String::from_utf8_lossy(&output.stdout).ends_with("END\n") {
                failures.push(format!(
                    "{program}: the batch did not run to its end: {}",
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
            for (index, (context, value)) in pairs.iter().enumerate() {
                let marker = dir.join(format!("M{index}"));
                if marker.exists() {
                    failures.push(format!(
                        "{program}: value {value:?} ran in context {context:?}"
                    ));
                }
            }
            failures
        }

        #[test]
        #[expect(
            clippy::print_stderr,
            reason = "a missing shell is said loudly rather than passed over silently"
        )]
        fn no_value_ever_runs_under_bash_or_dash() {
            let mut rng = Rng(0x5EED_0012_0BAD_CAFE);
            let mut failures = Vec::new();
            let mut pairs_run = 0;
            for (program, bash) in [("/bin/bash", true), ("/bin/dash", false)] {
                if !Path::new(program).exists() {
                    eprintln!("WARNING: {program} is missing; the differential test skips it");
                    continue;
                }
                // The compositions each shell accepts, found once.
                let mut contexts: Vec<String> = Vec::new();
                let mut tried = std::collections::BTreeSet::new();
                while contexts.len() < 300 && tried.len() < 3000 {
                    let candidate = context(&mut rng, bash);
                    if !tried.insert(candidate.clone()) {
                        continue;
                    }
                    let probe = candidate.replace('@', "x");
                    if syntax_ok(program, &probe)
                        && (bash || syntax_ok("/bin/bash", &probe))
                        && Template::parse(&candidate.replace('@', "{{ v }}"), 1, &[("v", false)])
                            .is_ok()
                    {
                        contexts.push(candidate);
                    }
                }
                let dir = tempfile::tempdir().unwrap();
                let mut done = 0;
                while done < PAIRS {
                    let pairs: Vec<(String, String)> = (0..BATCH)
                        .map(|index| {
                            let marker = dir.path().join(format!("M{index}"));
                            let context = contexts[rng.below(contexts.len())].clone();
                            (context, value(&mut rng, &marker.display().to_string()))
                        })
                        .collect();
                    failures.extend(run_batch(program, dir.path(), &pairs));
                    for entry in std::fs::read_dir(dir.path()).unwrap() {
                        std::fs::remove_file(entry.unwrap().path()).unwrap();
                    }
                    done += BATCH;
                }
                pairs_run += done;
            }
            assert!(
                failures.is_empty(),
                "{} failures:\n{}",
                failures.len(),
                failures.join("\n")
            );
            assert!(pairs_run >= 2 * PAIRS, "only {pairs_run} pairs ran");
        }
    }
}
