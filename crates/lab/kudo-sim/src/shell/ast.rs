//! The syntax tree of a parsed shell script (see [`super::parse`]).

use std::rc::Rc;

/// Commands separated by `;`, `&` or newlines.
pub(crate) type List = Vec<Item>;

/// One and-or list, run in the background when it ended with `&`.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub and_or: AndOr,
    pub background: bool,
}

/// Pipelines joined by `&&` and `||`.
#[derive(Debug, Clone)]
pub(crate) struct AndOr {
    pub first: Pipeline,
    pub rest: Vec<(Op, Pipeline)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    And,
    Or,
}

/// Commands joined by `|`, optionally negated with `!`.
#[derive(Debug, Clone)]
pub(crate) struct Pipeline {
    pub negate: bool,
    pub cmds: Vec<Command>,
}

#[derive(Debug, Clone)]
pub(crate) enum Command {
    Simple(Simple),
    Compound(Box<Compound>, Vec<Redir>),
    /// `name() compound` or `function name compound`.
    FuncDef(String, Rc<Compound>),
}

/// Assignments, words and redirections of one simple command.
#[derive(Debug, Clone, Default)]
pub(crate) struct Simple {
    pub assigns: Vec<(String, Word)>,
    pub words: Vec<Word>,
    pub redirs: Vec<Redir>,
}

#[derive(Debug, Clone)]
pub(crate) enum Compound {
    Brace(List),
    Subshell(List),
    If {
        branches: Vec<(List, List)>,
        otherwise: Option<List>,
    },
    Loop {
        until: bool,
        cond: List,
        body: List,
    },
    For {
        var: String,
        words: Option<Vec<Word>>,
        body: List,
    },
    Case {
        word: Word,
        arms: Vec<(Vec<Word>, List)>,
    },
    /// `[[ … ]]`: its words, evaluated as `test` with patterns on the right of `==`/`!=`.
    Cond(Vec<Word>),
    /// `(( … ))`.
    Arith(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Redir {
    /// The file descriptor redirected (`None`: the operator's default, 0 or 1).
    pub fd: Option<u32>,
    pub kind: RedirKind,
    pub target: Word,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedirKind {
    /// `>`
    Out,
    /// `>>`
    Append,
    /// `<`
    In,
    /// `>&N` / `<&N`
    Dup,
    /// `&>` (stdout and stderr to a file)
    OutErr,
    /// `&>>`
    AppendErr,
    /// `<<<` (bash's here-string)
    HereString,
}

/// A word: its parts, quoted or not, expanded and joined at run time.
#[derive(Debug, Clone, Default)]
pub(crate) struct Word(pub Vec<Part>);

#[derive(Debug, Clone)]
pub(crate) enum Part {
    /// Unquoted text (field splitting does not apply; globbing does).
    Lit(String),
    /// Quoted text: taken literally.
    Quoted(String),
    /// `$name`, `${…}`.
    Param { exp: ParamExp, quoted: bool },
    /// `$(…)` or backquotes.
    Cmd { list: Rc<List>, quoted: bool },
    /// `$((…))`.
    Arith { expr: String, quoted: bool },
}

/// A parameter expansion.
#[derive(Debug, Clone)]
pub(crate) struct ParamExp {
    pub name: String,
    pub op: ParamOp,
}

#[derive(Debug, Clone)]
pub(crate) enum ParamOp {
    Plain,
    /// `${#name}`
    Length,
    /// `${name-w}` / `${name:-w}` (`colon`: also when empty)
    Default {
        colon: bool,
        word: Word,
    },
    /// `${name=w}` / `${name:=w}`
    Assign {
        colon: bool,
        word: Word,
    },
    /// `${name+w}` / `${name:+w}`
    Alt {
        colon: bool,
        word: Word,
    },
    /// `${name?w}` / `${name:?w}`
    Error {
        colon: bool,
        word: Word,
    },
    /// `${name#p}` / `${name##p}`
    TrimPrefix {
        longest: bool,
        pattern: Word,
    },
    /// `${name%p}` / `${name%%p}`
    TrimSuffix {
        longest: bool,
        pattern: Word,
    },
    /// `${name:offset[:length]}`
    Substring {
        offset: String,
        length: Option<String>,
    },
    /// `${name/p/r}` / `${name//p/r}`
    Replace {
        all: bool,
        pattern: Word,
        with: Word,
    },
}

impl Word {
    /// The word's text when it is one unquoted literal (keywords, names).
    pub fn literal(&self) -> Option<&str> {
        match self.0.as_slice() {
            [Part::Lit(s)] => Some(s),
            _ => None,
        }
    }
}
