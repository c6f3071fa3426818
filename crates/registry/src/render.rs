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

/// A parsed body: text, tags and sections, checked against the declared parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    nodes: Vec<Node>,
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
enum Quoting {
    Unquoted,
    Double,
    Single,
    AnsiC,
}

/// A tag as written, for an error message: a line break inside the tag is shown as `\n`, so
/// the message stays on one line.
fn as_written(raw: &str) -> String {
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
        "line {line}: {tag} is inside a here-document, where a value cannot be quoted safely; assign it to a variable before the here-document and use the variable"
    )]
    InHereDocument {
        /// The tag as written.
        tag: String,
        /// Its line.
        line: usize,
    },
    /// The body ends inside a quote or command substitution.
    #[error("the body ends inside {what} opened on line {line}")]
    Unterminated {
        /// What is still open, e.g. `a double quote`.
        what: &'static str,
        /// Where it was opened.
        line: usize,
    },
}

/// Why arguments cannot be rendered into a body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A string holds a NUL character, which no process argument can carry.
    #[error("parameter `{name}` contains a NUL character, which cannot be passed to a shell")]
    Nul {
        /// The parameter.
        name: String,
    },
}

/// One tag as found in the text, before nesting.
struct Tag<'a> {
    sigil: Option<char>,
    name: &'a str,
    raw: &'a str,
    line: usize,
}

/// A flat token of the body.
enum Token<'a> {
    Text(&'a str),
    Tag(Tag<'a>),
}

impl Template {
    /// Parses `body`, whose first line is line `first_line` of the file; every
    /// tag must name one of `declared`.
    pub(crate) fn parse(
        body: &str,
        first_line: usize,
        declared: &[&str],
    ) -> Result<Template, TemplateError> {
        let tokens = tokenize(body, first_line)?;
        for token in &tokens {
            if let Token::Tag(tag) = token
                && !declared.contains(&tag.name)
            {
                return Err(TemplateError::Undeclared {
                    tag: as_written(tag.raw),
                    line: tag.line,
                });
            }
        }
        let contexts = quoting_of_tags(&tokens, first_line)?;
        let mut contexts = contexts.into_iter();
        let mut stack: Vec<Level<'_>> = vec![(Vec::new(), None)];
        for token in &tokens {
            match token {
                Token::Text(text) => push_node(&mut stack, Node::Text((*text).to_owned())),
                Token::Tag(tag) => {
                    // `quoting_of_tags` yields one context per tag, in order.
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
        Ok(Template { nodes })
    }

    /// Renders the body with `arguments` (an object, defaults already applied).
    pub(crate) fn render(&self, arguments: &Value) -> Result<String, RenderError> {
        let mut script = String::new();
        render_nodes(&self.nodes, arguments, &mut script)?;
        Ok(script)
    }
}

/// One level of section nesting: the nodes so far, and the section's opening tag and quoting (none at the top).
type Level<'a> = (Vec<Node>, Option<(&'a Tag<'a>, Quoting)>);

fn push_node(stack: &mut [Level<'_>], node: Node) {
    if let Some((nodes, _)) = stack.last_mut() {
        nodes.push(node);
    }
}

fn render_nodes(nodes: &[Node], arguments: &Value, script: &mut String) -> Result<(), RenderError> {
    for node in nodes {
        match node {
            Node::Text(text) => script.push_str(text),
            Node::Value { name, context } => match arguments.get(name) {
                None | Some(Value::Null) => {}
                Some(value) => quote_value(name, value, *context, script)?,
            },
            Node::Section {
                name,
                inverted,
                children,
            } => {
                if truthy(arguments.get(name)) != *inverted {
                    render_nodes(children, arguments, script)?;
                }
            }
        }
    }
    Ok(())
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

/// The text of one word: strings as they are, anything else as its JSON text.
fn word_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Writes `value` so that the shell reads it back as one word per element
/// (one word for a scalar) in `context`.
fn quote_value(
    name: &str,
    value: &Value,
    context: Quoting,
    script: &mut String,
) -> Result<(), RenderError> {
    let words: Vec<String> = match value {
        Value::Array(items) => items.iter().map(word_text).collect(),
        other => vec![word_text(other)],
    };
    if words.iter().any(|word| word.contains('\0')) {
        return Err(RenderError::Nul {
            name: name.to_owned(),
        });
    }
    match context {
        Quoting::Unquoted => script.push_str(&join_single_quoted(&words)),
        Quoting::Double => {
            let escaped: Vec<String> = words.iter().map(|word| escape_double(word)).collect();
            // Closing and reopening the double quotes between elements makes each its own word.
            script.push_str(&escaped.join("\" \""));
        }
        Quoting::Single => {
            script.push('\'');
            script.push_str(&join_single_quoted(&words));
            script.push('\'');
        }
        Quoting::AnsiC => {
            script.push('\'');
            script.push_str(&join_single_quoted(&words));
            script.push_str("$'");
        }
    }
    Ok(())
}

fn join_single_quoted(words: &[String]) -> String {
    words
        .iter()
        .map(|word| single_quote(word))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` as one POSIX shell word: `'…'`, with `'` written as `'\''`.
pub(crate) fn single_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// `word` for the inside of double quotes: the four characters that stay
/// special there (`\`, `$`, `` ` ``, `"`) get a backslash.
fn escape_double(word: &str) -> String {
    let mut escaped = String::with_capacity(word.len());
    for character in word.chars() {
        if matches!(character, '\\' | '$' | '`' | '"') {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
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
                tokens.push(Token::Tag(Tag {
                    sigil,
                    name,
                    raw,
                    line: tag_line,
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

/// `^[A-Za-z_][A-Za-z0-9_]*$`: what a parameter name may be.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|character| character.is_ascii_alphanumeric() || character == '_')
}

/// One level of shell quoting while scanning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Top level, or inside `$(…)` (counting nested parentheses) or backticks.
    Code {
        closer: Closer,
        depth: usize,
    },
    Double,
    Single,
    AnsiC,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closer {
    Top,
    Paren,
    Backtick,
}

/// A here-document announced by `<<` whose body starts after the current line.
struct PendingHereDocument {
    delimiter: String,
    strip_tabs: bool,
}

/// A character of the scanned body, or the place of the n-th tag.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Item {
    Char(char),
    Tag(usize),
}

/// The quoting context of every tag, in order.
fn quoting_of_tags(tokens: &[Token<'_>], first_line: usize) -> Result<Vec<Quoting>, TemplateError> {
    let mut items = Vec::new();
    let mut tags = Vec::new();
    for token in tokens {
        match token {
            Token::Text(text) => items.extend(text.chars().map(Item::Char)),
            Token::Tag(tag) => {
                items.push(Item::Tag(tags.len()));
                tags.push(tag);
            }
        }
    }
    let mut contexts = vec![Quoting::Unquoted; tags.len()];
    let mut stack: Vec<(Frame, usize)> = vec![(
        Frame::Code {
            closer: Closer::Top,
            depth: 0,
        },
        first_line,
    )];
    let mut pending: Vec<PendingHereDocument> = Vec::new();
    let mut line = first_line;
    let mut index = 0;
    let mut word_start = true;
    while index < items.len() {
        let item = items[index];
        let Some(&(frame, _)) = stack.last() else {
            break;
        };
        let character = match item {
            Item::Tag(tag_index) => {
                contexts[tag_index] = match frame {
                    Frame::Code { .. } => Quoting::Unquoted,
                    Frame::Double => Quoting::Double,
                    Frame::Single => Quoting::Single,
                    Frame::AnsiC => Quoting::AnsiC,
                };
                word_start = false;
                index += 1;
                continue;
            }
            Item::Char(character) => character,
        };
        let next = items.get(index + 1).copied();
        index += 1;
        if character == '\n' {
            line += 1;
            if matches!(frame, Frame::Code { .. }) && !pending.is_empty() {
                index = skip_here_documents(&items, index, &mut line, &mut pending, &tags)?;
            }
            word_start = true;
            continue;
        }
        match frame {
            Frame::Code { closer, depth } => {
                let starts_word = word_start;
                word_start = character.is_whitespace() || ";&|()<>".contains(character);
                match character {
                    '\\' => {
                        if let Some(Item::Char('\n')) = next {
                            line += 1;
                        }
                        index += 1;
                        word_start = false;
                    }
                    '#' if starts_word => {
                        while let Some(Item::Char(skipped)) = items.get(index) {
                            if *skipped == '\n' {
                                break;
                            }
                            index += 1;
                        }
                    }
                    '\'' => stack.push((Frame::Single, line)),
                    '"' => stack.push((Frame::Double, line)),
                    '`' if closer == Closer::Backtick => {
                        stack.pop();
                    }
                    '`' => stack.push((
                        Frame::Code {
                            closer: Closer::Backtick,
                            depth: 0,
                        },
                        line,
                    )),
                    '$' if next == Some(Item::Char('\'')) => {
                        index += 1;
                        stack.push((Frame::AnsiC, line));
                    }
                    '$' if next == Some(Item::Char('(')) => {
                        index += 1;
                        stack.push((
                            Frame::Code {
                                closer: Closer::Paren,
                                depth: 0,
                            },
                            line,
                        ));
                    }
                    '(' if closer == Closer::Paren => set_depth(&mut stack, depth + 1),
                    ')' if closer == Closer::Paren && depth == 0 => {
                        stack.pop();
                    }
                    ')' if closer == Closer::Paren => set_depth(&mut stack, depth - 1),
                    '<' if next == Some(Item::Char('<')) => {
                        index += 1;
                        if items.get(index) == Some(&Item::Char('<')) {
                            // A here-string (`<<<`) is an ordinary word.
                            index += 1;
                        } else {
                            let (heredoc, after) = here_document_word(&items, index);
                            index = after;
                            pending.push(heredoc);
                        }
                    }
                    _ => {}
                }
            }
            Frame::Double => match character {
                '\\' => {
                    if let Some(Item::Char('\n')) = next {
                        line += 1;
                    }
                    index += 1;
                }
                '"' => {
                    stack.pop();
                }
                '`' => stack.push((
                    Frame::Code {
                        closer: Closer::Backtick,
                        depth: 0,
                    },
                    line,
                )),
                '$' if next == Some(Item::Char('(')) => {
                    index += 1;
                    stack.push((
                        Frame::Code {
                            closer: Closer::Paren,
                            depth: 0,
                        },
                        line,
                    ));
                }
                _ => {}
            },
            Frame::Single => {
                if character == '\'' {
                    stack.pop();
                }
            }
            Frame::AnsiC => match character {
                '\\' => index += 1,
                '\'' => {
                    stack.pop();
                }
                _ => {}
            },
        }
    }
    if let Some(&(frame, opened)) = stack.last()
        && stack.len() > 1
    {
        let what = match frame {
            Frame::Code {
                closer: Closer::Paren,
                ..
            } => "a command substitution $(",
            Frame::Code { .. } => "a backtick command substitution",
            Frame::Double => "a double quote",
            Frame::Single => "a single quote",
            Frame::AnsiC => "a $' quote",
        };
        return Err(TemplateError::Unterminated { what, line: opened });
    }
    Ok(contexts)
}

fn set_depth(stack: &mut [(Frame, usize)], new_depth: usize) {
    if let Some((Frame::Code { depth, .. }, _)) = stack.last_mut() {
        *depth = new_depth;
    }
}

/// Reads the delimiter word after `<<` starting at `index`; returns the
/// here-document and the index after the word.
fn here_document_word(items: &[Item], mut index: usize) -> (PendingHereDocument, usize) {
    let strip_tabs = items.get(index) == Some(&Item::Char('-'));
    if strip_tabs {
        index += 1;
    }
    while let Some(Item::Char(' ' | '\t')) = items.get(index) {
        index += 1;
    }
    let mut delimiter = String::new();
    let mut quote: Option<char> = None;
    while let Some(item) = items.get(index) {
        let Item::Char(character) = *item else {
            // A tag in the delimiter makes it unmatchable; keep a marker so it never matches.
            delimiter.push('\0');
            index += 1;
            continue;
        };
        match (quote, character) {
            (Some(open), _) if character == open => quote = None,
            (Some(_), _) => delimiter.push(character),
            (None, '\'' | '"') => quote = Some(character),
            (None, '\\') => {
                if let Some(Item::Char(escaped)) = items.get(index + 1) {
                    delimiter.push(*escaped);
                    index += 1;
                }
            }
            (None, _) if character.is_whitespace() || ";&|()<>".contains(character) => break,
            (None, _) => delimiter.push(character),
        }
        index += 1;
    }
    (
        PendingHereDocument {
            delimiter,
            strip_tabs,
        },
        index,
    )
}

/// Skips the bodies of the pending here-documents, which start at `index`
/// (just after a newline); a tag inside one is an error.
fn skip_here_documents(
    items: &[Item],
    mut index: usize,
    line: &mut usize,
    pending: &mut Vec<PendingHereDocument>,
    tags: &[&Tag<'_>],
) -> Result<usize, TemplateError> {
    for heredoc in pending.drain(..) {
        loop {
            if index >= items.len() {
                return Ok(index);
            }
            let mut text = String::new();
            let mut tag_in_line = None;
            while let Some(item) = items.get(index) {
                index += 1;
                match *item {
                    Item::Char('\n') => break,
                    Item::Char(character) => text.push(character),
                    Item::Tag(tag_index) => {
                        tag_in_line.get_or_insert(tag_index);
                    }
                }
            }
            *line += 1;
            if let Some(tag_index) = tag_in_line
                && let Some(tag) = tags.get(tag_index)
            {
                return Err(TemplateError::InHereDocument {
                    tag: as_written(tag.raw),
                    line: tag.line,
                });
            }
            let candidate = if heredoc.strip_tabs {
                text.trim_start_matches('\t')
            } else {
                &text
            };
            if candidate == heredoc.delimiter {
                break;
            }
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::render::Template;

    const DECLARED: &[&str] = &["a", "b", "name", "list", "flag", "count"];

    /// Parses `body` (starting at line 1) and renders it with `arguments`;
    /// errors of either step are compared as messages.
    fn check(body: &str, arguments: Value, expect: Result<&str, &str>) {
        let actual = Template::parse(body, 1, DECLARED)
            .map_err(|error| error.to_string())
            .and_then(|template| {
                template
                    .render(&arguments)
                    .map_err(|error| error.to_string())
            });
        assert_eq!(
            actual,
            expect.map(str::to_owned).map_err(str::to_owned),
            "{body:?}"
        );
    }

    #[test]
    fn plain_text_is_kept() {
        check("echo hi\n", json!({}), Ok("echo hi\n"));
        check("", json!({}), Ok(""));
    }

    #[test]
    fn values_are_single_quoted() {
        check("echo {{ name }}", json!({"name": "Ada"}), Ok("echo 'Ada'"));
        check(
            "echo {{name}}",
            json!({"name": "it's"}),
            Ok(r"echo 'it'\''s'"),
        );
        check("echo {{  name  }}", json!({"name": ""}), Ok("echo ''"));
        check("echo {{ count }}", json!({"count": 2.5}), Ok("echo '2.5'"));
        check(
            "echo {{ flag }}",
            json!({"flag": false}),
            Ok("echo 'false'"),
        );
    }

    #[test]
    fn injection_vectors_stay_one_word() {
        check(
            "echo {{ name }}",
            json!({"name": "; rm -rf / `id` $(id) \n x"}),
            Ok("echo '; rm -rf / `id` $(id) \n x'"),
        );
    }

    #[test]
    fn absent_values_render_nothing() {
        check("echo {{ name }}.", json!({}), Ok("echo ."));
        check("echo {{ name }}.", json!({"name": null}), Ok("echo ."));
    }

    #[test]
    fn arrays_are_one_word_per_element() {
        check(
            "ls {{ list }}",
            json!({"list": ["a b", "c", 3]}),
            Ok("ls 'a b' 'c' '3'"),
        );
        check("ls {{ list }}", json!({"list": []}), Ok("ls "));
        check(
            "ls \"{{ list }}\"",
            json!({"list": ["a b", "c"]}),
            Ok("ls \"a b\" \"c\""),
        );
    }

    #[test]
    fn double_quote_context() {
        check(
            r#"kubectl -l "{{ name }}""#,
            json!({"name": r#"app=$(x) `y` "z" \w"#}),
            Ok(r#"kubectl -l "app=\$(x) \`y\` \"z\" \\w""#),
        );
        check(
            r#"echo "a\"{{ name }}""#,
            json!({"name": "x"}),
            Ok(r#"echo "a\"x""#),
        );
    }

    #[test]
    fn single_quote_context_closes_and_reopens() {
        check(
            "echo 'x{{ name }}y'",
            json!({"name": "it's"}),
            Ok(r"echo 'x''it'\''s''y'"),
        );
        check(
            "echo $'x{{ name }}y'",
            json!({"name": "q"}),
            Ok("echo $'x''q'$'y'"),
        );
    }

    #[test]
    fn command_substitution_and_backticks_are_code() {
        check(
            r#"echo "$(printf %s {{ name }})""#,
            json!({"name": "a b"}),
            Ok(r#"echo "$(printf %s 'a b')""#),
        );
        check(
            r#"echo "`printf %s {{ name }}`""#,
            json!({"name": "a"}),
            Ok(r#"echo "`printf %s 'a'`""#),
        );
        check(
            "echo $( (echo) ; echo {{ name }} )",
            json!({"name": "a"}),
            Ok("echo $( (echo) ; echo 'a' )"),
        );
    }

    #[test]
    fn comments_do_not_open_quotes() {
        check(
            "# don't worry\necho {{ name }}",
            json!({"name": "a"}),
            Ok("# don't worry\necho 'a'"),
        );
        check(
            "echo a#'{{ name }}'",
            json!({"name": "b"}),
            Ok("echo a#'''b'''"),
        );
    }

    #[test]
    fn sections() {
        let body = "get{{# name }} -l {{ name }}{{/ name }}";
        check(body, json!({"name": "app"}), Ok("get -l 'app'"));
        check(body, json!({"name": ""}), Ok("get"));
        check(body, json!({}), Ok("get"));
        let inverted = "{{^ flag }}dry-run{{/ flag }}";
        check(inverted, json!({"flag": false}), Ok("dry-run"));
        check(inverted, json!({"flag": true}), Ok(""));
        check(inverted, json!({}), Ok("dry-run"));
        check("{{# count }}n{{/ count }}", json!({"count": 0}), Ok(""));
        check("{{# count }}n{{/ count }}", json!({"count": 0.5}), Ok("n"));
        check("{{# list }}l{{/ list }}", json!({"list": []}), Ok(""));
        check("{{# list }}l{{/ list }}", json!({"list": [""]}), Ok("l"));
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
            "docker inspect -f '{{.State}}' {{ name }} {{ not a tag }}",
            json!({"name": "c"}),
            Ok("docker inspect -f '{{.State}}' 'c' {{ not a tag }}"),
        );
        check("echo {{ name", json!({"name": "c"}), Ok("echo {{ name"));
    }

    #[test]
    fn here_strings_are_words() {
        check(
            "cat <<< {{ name }}",
            json!({"name": "x"}),
            Ok("cat <<< 'x'"),
        );
    }

    #[test]
    fn here_documents() {
        check(
            "cat <<EOF\n$x\nEOF\necho {{ name }}",
            json!({"name": "y"}),
            Ok("cat <<EOF\n$x\nEOF\necho 'y'"),
        );
        check(
            "cat <<-'E F'\n\tdon't\n\tE F\necho {{ name }}",
            json!({"name": "y"}),
            Ok("cat <<-'E F'\n\tdon't\n\tE F\necho 'y'"),
        );
        check(
            "cat <<EOF\nhi {{ name }}\nEOF\n",
            json!({}),
            Err(
                "line 2: {{ name }} is inside a here-document, where a value cannot be quoted safely; assign it to a variable before the here-document and use the variable",
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
    fn nul_is_refused_at_render_time() {
        check(
            "echo {{ name }}",
            json!({"name": "a\u{0}b"}),
            Err("parameter `name` contains a NUL character, which cannot be passed to a shell"),
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

        use crate::render::Template;

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

        fn run_shell(shell: &Path, script: &str) -> Vec<Vec<String>> {
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
                let declared: Vec<&str> = names.iter().map(String::as_str).collect();
                let template = Template::parse(&body, 1, &declared).unwrap();
                let rendered = template.render(&arguments).unwrap();
                for shell in ["/bin/sh", "/bin/bash"] {
                    let calls = run_shell(Path::new(shell), &rendered);
                    prop_assert_eq!(&calls, &expected, "shell {}", shell);
                }
            }
        }
    }
}
