//! Where each tag of a manifest body stands in the shell grammar: its quoting (for a reference that reads back exactly the value), and whether bash would evaluate the value there (arithmetic, a variable name, a string run as code), which refuses the manifest at load time.
//!
//! Values never enter the script text (see `render.rs`): a tag becomes `"${TOOLSMITH_ARG_x}"`,
//! which every POSIX shell expands exactly once. So a misread quote only costs exactness,
//! never safety; what this scan must not miss is a place where the *expanded* value is read
//! again as code. In bash those are arithmetic (`$(( ))`, `(( ))`, `$[ ]`, `let`,
//! `declare -i`, `[[ … -gt … ]]`, array subscripts, `${x:offset}`), variable names (`read`,
//! `printf -v`, `declare`, `unset`, `[[ -v ]]`, …), whose subscripts are arithmetic, and
//! strings run as code (`eval`, `trap`, `sh -c`). A tag there is refused unless its
//! parameter is an integer or a number, whose JSON text holds no code.
//! The scan models bash, the richer grammar: dash reads a subset, and evaluates nothing of a
//! value in arithmetic.

mod chars;
mod commands;

use crate::formats::manifest::render::{
    Item, MAX_COMMAND_WORDS, MAX_SHELL_NESTING, Quoting, Tag, TemplateError, as_written,
};
use crate::formats::manifest::tag_context::commands::{
    ARITHMETIC_OPERATORS, analyze, first_command_word, is_assignment, skipped_words, word_tags,
    word_text,
};

/// What a tag is, for the refusals that apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TagKind {
    /// `{{ name }}` of a string, boolean or array parameter.
    Value,
    /// `{{ name }}` of an integer or number parameter.
    Numeric,
    /// `{{# name }}`, `{{^ name }}`, `{{/ name }}`: no value is written.
    Section,
}

/// Why a tag cannot stand where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Backslash,
    Arithmetic(&'static str),
    Name(&'static str),
    Code(&'static str),
}

impl Refusal {
    pub(crate) fn sentence(self) -> String {
        match self {
            Refusal::Backslash => "follows a backslash, which would escape the first character of the value's reference; remove the backslash (write \\\\ for a literal one)".to_owned(),
            Refusal::Arithmetic(what) => format!(
                "stands in an arithmetic context ({what}), where bash evaluates the value as an expression and runs any $(…) in it; only integer and number parameters may stand there"
            ),
            Refusal::Name(what) => format!(
                "stands where bash expects a variable name ({what}), and bash evaluates the array subscript of a name as arithmetic, running any $(…) in it; only integer and number parameters may stand there"
            ),
            Refusal::Code(what) => format!(
                "stands in text that is run as code ({what}); pass the value as an argument instead, e.g. sh -c 'echo \"$1\"' sh {{{{ value }}}}"
            ),
        }
    }

    /// Whether a numeric parameter may stand here: its JSON text is digits, `-`, `.`, `e`, `+`.
    fn admits_numbers(self) -> bool {
        !matches!(self, Refusal::Backslash)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CodeKind {
    Top,
    /// `$(…)`, closed by the `)` at depth 0.
    Paren,
    Backtick,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArithCloser {
    /// `$((…))` and `((…))`.
    DoubleParen,
    /// `$[…]`.
    Bracket,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BracePhase {
    /// Right after `${`: the parameter's name.
    Name,
    /// After an operator that takes a word (`:-`, `#`, `/`, …).
    Word,
    /// After `:` (substring offset and length): arithmetic.
    Offset,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Frame {
    Code {
        kind: CodeKind,
        depth: usize,
        command: Command,
    },
    Arith {
        closer: ArithCloser,
        depth: usize,
        what: &'static str,
    },
    /// `[…]` of an array subscript (`a[i]=`, `${a[i]}`, `([i]=v)`): arithmetic.
    Subscript {
        depth: usize,
    },
    /// `(…)` of an array assignment `a=(…)`.
    ArrayLiteral,
    Brace {
        in_double: bool,
        phase: BracePhase,
        depth: usize,
    },
    Double,
    Single,
    AnsiC,
}

impl Frame {
    /// A copy of the frame without the words of its command, which the loop over the
    /// characters never reads: copying them at every character made a long command quadratic.
    fn without_words(&self) -> Frame {
        match self {
            Frame::Code { kind, depth, .. } => Frame::Code {
                kind: *kind,
                depth: *depth,
                command: Command::default(),
            },
            other => other.clone(),
        }
    }
}

/// The words of the simple command being read in one code frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Command {
    words: Vec<Word>,
    word_start: Option<usize>,
    next_is_redirect: bool,
    in_double_bracket: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Word {
    start: usize,
    end: usize,
    redirect: bool,
}

/// A here-document announced by `<<` whose body starts after the current line.
struct PendingHereDocument {
    delimiter: String,
    strip_tabs: bool,
}

struct Scan<'a> {
    items: &'a [Item],
    tags: &'a [&'a Tag<'a>],
    contexts: Vec<Quoting>,
    refusals: Vec<Option<Refusal>>,
    stack: Vec<(Frame, usize)>,
    line: usize,
    first_line: usize,
    kinds: &'a [TagKind],
    /// Variables assigned a string value (`x={{ v }}`), for the arithmetic warning.
    tainted: Vec<String>,
    warnings: Vec<(usize, String)>,
    /// Where each open arithmetic frame's text starts.
    arithmetic_starts: Vec<usize>,
}

/// The quoting of every tag, in order, or the first tag that cannot stand where it is.
///
/// Also returns warnings about second interpreters (`eval`, `sh -c`, `source`, awk or python
/// programs that receive a value, a variable holding a value later evaluated as arithmetic):
/// places a value may become code that no scan of the body can rule out.
pub(crate) fn contexts_of_tags(
    items: &[Item],
    tags: &[&Tag<'_>],
    kinds: &[TagKind],
    first_line: usize,
) -> Result<(Vec<Quoting>, Vec<String>), TemplateError> {
    let mut scan = Scan {
        first_line,
        kinds,
        tainted: Vec::new(),
        warnings: Vec::new(),
        arithmetic_starts: Vec::new(),
        items,
        tags,
        contexts: vec![Quoting::Unquoted; tags.len()],
        refusals: vec![None; tags.len()],
        stack: vec![(
            Frame::Code {
                kind: CodeKind::Top,
                depth: 0,
                command: Command::default(),
            },
            first_line,
        )],
        line: first_line,
    };
    scan.run()?;
    for (index, refusal) in scan.refusals.iter().enumerate() {
        let Some(refusal) = refusal else { continue };
        match kinds.get(index) {
            Some(TagKind::Section) => continue,
            Some(TagKind::Numeric) if refusal.admits_numbers() => continue,
            _ => {}
        }
        let tag = tags[index];
        return Err(TemplateError::Refused {
            tag: as_written(tag.raw),
            line: tag.line,
            column: tag.column,
            reason: refusal.sentence(),
        });
    }
    let mut warnings = scan.warnings;
    warnings.sort();
    warnings.dedup();
    Ok((
        scan.contexts,
        warnings
            .into_iter()
            .map(|(line, warning)| format!("line {line}: {warning}"))
            .collect(),
    ))
}

fn is_name_char(character: char) -> bool {
    character.is_ascii_alphanumeric() || character == '_'
}

impl Scan<'_> {
    fn char_at(&self, index: usize) -> Option<char> {
        match self.items.get(index) {
            Some(Item::Char(character)) => Some(*character),
            _ => None,
        }
    }

    fn refuse(&mut self, tag_index: usize, refusal: Refusal) {
        if let Some(slot) = self.refusals.get_mut(tag_index)
            && slot.is_none()
        {
            *slot = Some(refusal);
        }
    }

    /// The innermost code frame's command.
    fn command_mut(&mut self) -> Option<&mut Command> {
        self.stack
            .iter_mut()
            .rev()
            .find_map(|(frame, _)| match frame {
                Frame::Code { command, .. } => Some(command),
                _ => None,
            })
    }

    /// Starts a word in the innermost code frame, if the top frame is that code frame.
    fn touch_word(&mut self, index: usize) {
        if let Some((Frame::Code { command, .. }, _)) = self.stack.last_mut()
            && command.word_start.is_none()
        {
            command.word_start = Some(index);
        }
    }

    fn end_word(&mut self, index: usize) {
        if let Some((Frame::Code { command, .. }, _)) = self.stack.last_mut()
            && let Some(start) = command.word_start.take()
        {
            command.words.push(Word {
                start,
                end: index,
                redirect: command.next_is_redirect,
            });
            command.next_is_redirect = false;
            let first = first_command_word(self.items, &command.words);
            if let Some(first) = first {
                let text = word_text(self.items, first);
                let last = word_text(self.items, *command.words.last().unwrap_or(&first));
                if text == "[["
                    && command.words.len() == 1 + skipped_words(self.items, &command.words)
                {
                    command.in_double_bracket = true;
                } else if command.in_double_bracket && last == "]]" {
                    command.in_double_bracket = false;
                }
            }
        }
    }

    /// Pushes an operator of `[[ … ]]` as a word of its own.
    fn operator_word(&mut self, index: usize) {
        self.end_word(index);
        if let Some((Frame::Code { command, .. }, _)) = self.stack.last_mut() {
            command.words.push(Word {
                start: index,
                end: index + 1,
                redirect: false,
            });
        }
    }

    fn end_command(&mut self, index: usize) {
        self.end_word(index);
        let words = match self.stack.last_mut() {
            Some((Frame::Code { command, .. }, _)) => {
                command.in_double_bracket = false;
                std::mem::take(&mut command.words)
            }
            _ => return,
        };
        for (tag_index, refusal) in analyze(self.items, &words) {
            self.refuse(tag_index, refusal);
        }
        self.warn_about_command(&words);
    }

    fn line_of(&self, index: usize) -> usize {
        self.first_line
            + self.items[..index.min(self.items.len())]
                .iter()
                .filter(|item| **item == Item::Char('\n'))
                .count()
    }

    /// Whether a word holds a tag of a parameter that is not numeric.
    fn holds_string_value(&self, word: Word) -> bool {
        word_tags(self.items, word)
            .iter()
            .any(|tag_index| self.kinds.get(*tag_index) == Some(&TagKind::Value))
    }

    /// Warns when `text` (arithmetic) names a variable that holds a value.
    fn warn_about_arithmetic(&mut self, text: &str, index: usize) {
        let names = text.split(|character: char| !is_name_char(character));
        let mut tainted = None;
        for name in names {
            if self.tainted.iter().any(|variable| variable == name) {
                tainted = Some(name.to_owned());
                break;
            }
        }
        if let Some(name) = tainted {
            let line = self.line_of(index);
            self.warnings.push((
                line,
                format!(
                    "variable {name} holds a value and is evaluated as arithmetic here, where bash runs any $(…) in it; declare the parameter as integer or number"
                ),
            ));
        }
    }

    fn warn_about_command(&mut self, words: &[Word]) {
        let skipped = skipped_words(self.items, words);
        for word in &words[..skipped] {
            let text = word_text(self.items, *word);
            if is_assignment(&text) && self.holds_string_value(*word) {
                let name: String = text
                    .chars()
                    .take_while(|character| is_name_char(*character))
                    .collect();
                self.tainted.push(name);
            }
        }
        let words: Vec<Word> = words[skipped..]
            .iter()
            .copied()
            .filter(|word| !word.redirect)
            .collect();
        let Some(first) = words.first() else { return };
        let line = self.line_of(first.start);
        let name = word_text(self.items, *first);
        let program = name.rsplit('/').next().unwrap_or(&name).to_owned();
        let texts: Vec<String> = words[1..]
            .iter()
            .map(|word| word_text(self.items, *word))
            .collect();
        let warning = match program.as_str() {
            "eval" => Some("eval runs its arguments as code: a value that reaches them, directly or through a variable, runs as code".to_owned()),
            "source" | "." => Some(format!("{program} runs a file as code: make sure no value chooses or writes that file")),
            "sh" | "bash" | "dash" | "ksh" | "zsh" if texts.iter().any(|text| text.starts_with('-') && !text.starts_with("--") && text.contains('c')) => Some(format!(
                "{program} -c runs a second shell: pass values as its positional arguments ({program} -c '… \"$1\" …' {program} \"$x\"), never inside its script, not even through a variable"
            )),
            "awk" | "gawk" | "mawk" | "nawk" | "python" | "python3" | "perl" | "ruby" | "node" | "php"
                if words[1..].iter().any(|word| self.holds_string_value(*word)) =>
            {
                Some(format!(
                    "{program} receives a value: make sure it arrives as data (awk -v, sys.argv, @ARGV, an environment variable), never inside the program text"
                ))
            }
            "let" => {
                for (word, text) in words[1..].iter().zip(&texts) {
                    self.warn_about_arithmetic(text, word.start);
                }
                None
            }
            "local" | "declare" | "typeset" | "export" | "readonly" => {
                for (word, text) in words[1..].iter().zip(&texts) {
                    if is_assignment(text) && self.holds_string_value(*word) {
                        let name: String = text.chars().take_while(|character| is_name_char(*character)).collect();
                        self.tainted.push(name);
                    }
                }
                None
            }
            "[[" => {
                for (position, word) in words[1..].iter().enumerate() {
                    let before = position.checked_sub(1).and_then(|before| texts.get(before));
                    let after = texts.get(position + 1);
                    if [before, after].into_iter().flatten().any(|text| ARITHMETIC_OPERATORS.contains(&text.as_str())) {
                        let text = texts[position].clone();
                        self.warn_about_arithmetic(&text, word.start);
                    }
                }
                None
            }
            _ => None,
        };
        if let Some(warning) = warning {
            self.warnings.push((line, warning));
        }
    }

    fn in_double_bracket(&self) -> bool {
        matches!(
            self.stack.last(),
            Some((Frame::Code { command, .. }, _)) if command.in_double_bracket
        )
    }

    /// Whether the current code frame's command has only reserved words so far, so that
    /// `((` there opens an arithmetic command.
    fn at_command_start(&self) -> bool {
        match self.stack.last() {
            Some((Frame::Code { command, .. }, _)) => {
                command.word_start.is_none()
                    && command.words.iter().all(|word| {
                        matches!(
                            word_text(self.items, *word).as_str(),
                            "for"
                                | "if"
                                | "then"
                                | "else"
                                | "elif"
                                | "do"
                                | "while"
                                | "until"
                                | "!"
                                | "{"
                                | "time"
                        )
                    })
            }
            _ => false,
        }
    }

    fn run(&mut self) -> Result<(), TemplateError> {
        let mut index = 0;
        let mut pending: Vec<PendingHereDocument> = Vec::new();
        while index < self.items.len() {
            let Some(frame) = self.stack.last().map(|(frame, _)| frame.without_words()) else {
                break;
            };
            if self.stack.len() > MAX_SHELL_NESTING {
                return Err(TemplateError::TooDeep { line: self.line });
            }
            if let Frame::Code { command, .. } = &self.stack[self.stack.len() - 1].0
                && command.words.len() > MAX_COMMAND_WORDS
            {
                return Err(TemplateError::TooManyWords { line: self.line });
            }
            let item = self.items[index];
            if let Item::Tag(tag_index) = item {
                self.tag(tag_index, &frame, index);
                index += 1;
                continue;
            }
            let Item::Char(character) = item else {
                index += 1;
                continue;
            };
            let next = self.items.get(index + 1).copied();
            if character == '\n' {
                self.line += 1;
            }
            match frame {
                Frame::Code { kind, depth, .. } => {
                    index = self.code_char(index, character, next, kind, depth, &mut pending)?;
                }
                Frame::Arith { closer, depth, .. } => {
                    index = self.arith_char(index, character, next, closer, depth);
                }
                Frame::Subscript { depth } => {
                    index = match character {
                        '[' => {
                            self.set_depth(depth + 1);
                            index + 1
                        }
                        ']' if depth == 0 => {
                            self.close_arithmetic(index);
                            index + 1
                        }
                        ']' => {
                            self.set_depth(depth - 1);
                            index + 1
                        }
                        _ => self.shared_char(index, character, next, false),
                    };
                }
                Frame::ArrayLiteral => {
                    index = match character {
                        ')' => {
                            self.stack.pop();
                            index + 1
                        }
                        '[' if matches!(
                            self.char_at(index.wrapping_sub(1)),
                            Some('(' | ' ' | '\t' | '\n')
                        ) =>
                        {
                            self.push_arithmetic(Frame::Subscript { depth: 0 }, index);
                            index + 1
                        }
                        _ => self.shared_char(index, character, next, false),
                    };
                }
                Frame::Brace {
                    in_double,
                    phase,
                    depth,
                } => {
                    index = self.brace_char(index, character, next, in_double, phase, depth);
                }
                Frame::Double => {
                    index = match character {
                        '"' => {
                            self.stack.pop();
                            index + 1
                        }
                        '\'' => index + 1,
                        _ => self.shared_char(index, character, next, true),
                    };
                }
                Frame::Single => {
                    if character == '\'' {
                        self.stack.pop();
                    }
                    index += 1;
                }
                Frame::AnsiC => {
                    index = match character {
                        '\\' => self.backslash(index, next),
                        '\'' => {
                            self.stack.pop();
                            index + 1
                        }
                        _ => index + 1,
                    };
                }
            }
        }
        self.end_command(self.items.len());
        self.unterminated()
    }

    /// One character inside an arithmetic expression closed by `closer`, at nesting `depth`;
    /// the index of the next item.
    fn arith_char(
        &mut self,
        index: usize,
        character: char,
        next: Option<Item>,
        closer: ArithCloser,
        depth: usize,
    ) -> usize {
        match (closer, character) {
            (ArithCloser::DoubleParen, '(') | (ArithCloser::Bracket, '[') => {
                self.set_depth(depth + 1);
                index + 1
            }
            (ArithCloser::DoubleParen, ')') if depth == 0 => {
                self.close_arithmetic(index);
                if next == Some(Item::Char(')')) {
                    index + 2
                } else {
                    index + 1
                }
            }
            (ArithCloser::Bracket, ']') if depth == 0 => {
                self.close_arithmetic(index);
                index + 1
            }
            (ArithCloser::DoubleParen, ')') | (ArithCloser::Bracket, ']') => {
                self.set_depth(depth - 1);
                index + 1
            }
            _ => self.shared_char(index, character, next, false),
        }
    }

    /// The error for a construct the body opens and never closes, if any.
    fn unterminated(&self) -> Result<(), TemplateError> {
        if let Some(&(ref frame, opened)) = self.stack.last()
            && self.stack.len() > 1
        {
            let what = match frame {
                Frame::Code {
                    kind: CodeKind::Paren,
                    ..
                } => "a command substitution $(",
                Frame::Code { .. } => "a backtick command substitution",
                Frame::Arith { .. } => "an arithmetic expression",
                Frame::Subscript { .. } => "an array subscript [",
                Frame::ArrayLiteral => "an array assignment (",
                Frame::Brace { .. } => "a parameter expansion ${",
                Frame::Double => "a double quote",
                Frame::Single => "a single quote",
                Frame::AnsiC => "a $' quote",
            };
            return Err(TemplateError::Unterminated { what, line: opened });
        }
        Ok(())
    }

    fn tag(&mut self, tag_index: usize, frame: &Frame, index: usize) {
        self.contexts[tag_index] = match frame {
            Frame::Code { .. }
            | Frame::Arith { .. }
            | Frame::Subscript { .. }
            | Frame::ArrayLiteral => Quoting::Unquoted,
            Frame::Brace {
                in_double: true, ..
            }
            | Frame::Double => Quoting::Double,
            Frame::Brace {
                in_double: false, ..
            } => Quoting::Unquoted,
            Frame::Single => Quoting::Single,
            Frame::AnsiC => Quoting::AnsiC,
        };
        if let Frame::Brace {
            phase: BracePhase::Name,
            ..
        } = frame
        {
            self.refuse(tag_index, Refusal::Name("the name in ${…}"));
        }
        let arithmetic = self.stack.iter().rev().find_map(|(frame, _)| match frame {
            Frame::Arith { what, .. } => Some(*what),
            Frame::Subscript { .. } => Some("an array subscript"),
            Frame::Brace {
                phase: BracePhase::Offset,
                ..
            } => Some("a ${name:offset:length} expansion"),
            _ => None,
        });
        if let Some(what) = arithmetic {
            self.refuse(tag_index, Refusal::Arithmetic(what));
        }
        self.touch_word(index);
    }

    fn push_arithmetic(&mut self, frame: Frame, index: usize) {
        self.stack.push((frame, self.line));
        self.arithmetic_starts.push(index);
    }

    /// Pops an arithmetic frame (or subscript) that ends at `index`, warning when its text
    /// names a variable that holds a value.
    fn close_arithmetic(&mut self, index: usize) {
        let opened = self.arithmetic_starts.pop().unwrap_or(index);
        self.stack.pop();
        let text: String = self.items[opened.min(index)..index]
            .iter()
            .filter_map(|item| match item {
                Item::Char(character) => Some(*character),
                Item::Tag(_) => None,
            })
            .collect();
        self.warn_about_arithmetic(&text, index);
    }

    fn set_depth(&mut self, new_depth: usize) {
        if let Some((
            Frame::Code { depth, .. }
            | Frame::Arith { depth, .. }
            | Frame::Subscript { depth }
            | Frame::Brace { depth, .. },
            _,
        )) = self.stack.last_mut()
        {
            *depth = new_depth;
        }
    }

    /// A backslash at `index`: a tag right after it is refused; any other character is skipped.
    fn backslash(&mut self, index: usize, next: Option<Item>) -> usize {
        match next {
            Some(Item::Tag(tag_index)) => {
                self.refuse(tag_index, Refusal::Backslash);
                index + 1
            }
            Some(Item::Char('\n')) => {
                self.line += 1;
                index + 2
            }
            Some(Item::Char(_)) => index + 2,
            None => index + 1,
        }
    }
}
