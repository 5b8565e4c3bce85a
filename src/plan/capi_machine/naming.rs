//! The name of a Cluster API machine's VM: `spec.namingStrategy.template`, a Go `text/template`
//! over `{machine: {name}}` with sprig's `trimSuffix` and `trunc` (CAPV's only two functions),
//! plus the template language's own `if`/`else`/`end`, `len`, comparisons and `and`/`or`/`not`.
//!
//! This is a small interpreter for that subset, written here so the webhook and the planner
//! agree on every name without a Go runtime. Anything outside the subset is a parse error naming
//! what was not understood; a missing key is an error (CAPV runs with `missingkey=error`).
//! Results longer than 63 characters are cut, as CAPV does.

use std::fmt;

/// The longest VM object name (CAPV cuts to this, deterministically, without a suffix).
pub const MAX_NAME_LENGTH: usize = 63;

/// Why a naming template could not be rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

fn fail<T>(msg: impl Into<String>) -> Result<T, TemplateError> {
    Err(TemplateError(msg.into()))
}

/// The VM name for `machine_name` under `template` (None: the machine name itself).
pub fn render_name(machine_name: &str, template: Option<&str>) -> Result<String, TemplateError> {
    if machine_name.is_empty() {
        return fail("machine name can not be empty");
    }
    let Some(template) = template else {
        return Ok(machine_name.to_string());
    };
    let nodes = parse(template)?;
    let mut out = String::new();
    exec(&nodes, machine_name, &mut out)?;
    Ok(out.chars().take(MAX_NAME_LENGTH).collect())
}

/// The Windows cut: a VM name of a Windows guest has at most 15 characters (the NetBIOS limit).
/// CAPV keeps the first 9 (without a trailing `-`) and the last 5; it tests the *machine* name's
/// length but slices the generated one, and so panics on a template that renders fewer than 9
/// characters from a long machine name. Here the generated name is what is measured.
pub fn windows_name(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= 15 {
        return name.to_string();
    }
    let head: String = chars[..9].iter().collect();
    let tail: String = chars[chars.len() - 5..].iter().collect();
    format!("{}-{tail}", head.trim_end_matches('-'))
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Text(String),
    Output(Pipeline),
    If {
        cond: Pipeline,
        then: Vec<Node>,
        otherwise: Vec<Node>,
    },
}

type Pipeline = Vec<Command>;
type Command = Vec<Operand>;

#[derive(Clone, Debug, PartialEq)]
enum Operand {
    Field(Vec<String>),
    Dot,
    Str(String),
    Int(i64),
    Bool(bool),
    Func(String),
    Sub(Pipeline),
}

#[derive(Clone, Debug, PartialEq)]
enum Val {
    Str(String),
    Int(i64),
    Bool(bool),
    Map(&'static str),
}

impl Val {
    fn truthy(&self) -> bool {
        match self {
            Val::Str(s) => !s.is_empty(),
            Val::Int(i) => *i != 0,
            Val::Bool(b) => *b,
            Val::Map(_) => true,
        }
    }

    fn show(&self) -> String {
        match self {
            Val::Str(s) => s.clone(),
            Val::Int(i) => i.to_string(),
            Val::Bool(b) => b.to_string(),
            Val::Map(_) => "map[...]".into(),
        }
    }
}

const FUNCS: [&str; 12] = [
    "trimSuffix",
    "trunc",
    "len",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "and",
    "or",
    "not",
];

/// Splits the template into text and actions, honouring `{{-` / `-}}` whitespace trimming.
fn actions(src: &str) -> Result<Vec<(bool, String)>, TemplateError> {
    let mut out: Vec<(bool, String)> = Vec::new();
    let mut rest = src;
    while let Some(start) = rest.find("{{") {
        let mut text = rest[..start].to_string();
        let after = &rest[start + 2..];
        let (after, trim_left) = match after.strip_prefix("- ") {
            Some(a) => (a, true),
            None => (after, false),
        };
        if trim_left {
            text = text.trim_end().to_string();
        }
        out.push((false, text));
        let Some(end) = after.find("}}") else {
            return fail("unclosed action");
        };
        let mut body = &after[..end];
        let mut next = &after[end + 2..];
        if let Some(b) = body.strip_suffix(" -") {
            body = b;
            next = next.trim_start();
        }
        out.push((true, body.trim().to_string()));
        rest = next;
    }
    out.push((false, rest.to_string()));
    Ok(out)
}

fn parse(src: &str) -> Result<Vec<Node>, TemplateError> {
    let parts = actions(src)?;
    let mut i = 0;
    let (nodes, stop) = parse_list(&parts, &mut i)?;
    match stop {
        None => Ok(nodes),
        Some(s) => fail(format!("unexpected {{{{{s}}}}}")),
    }
}

/// Parses nodes until `else`/`end` (returned) or the end of input.
fn parse_list(
    parts: &[(bool, String)],
    i: &mut usize,
) -> Result<(Vec<Node>, Option<String>), TemplateError> {
    let mut nodes = Vec::new();
    while *i < parts.len() {
        let (is_action, body) = &parts[*i];
        *i += 1;
        if !is_action {
            if !body.is_empty() {
                nodes.push(Node::Text(body.clone()));
            }
            continue;
        }
        if body.starts_with("/*") {
            continue;
        }
        let word = body.split_whitespace().next().unwrap_or_default();
        match word {
            "end" | "else" => return Ok((nodes, Some(body.clone()))),
            "if" => nodes.push(parse_if(body["if".len()..].trim(), parts, i)?),
            "" => return fail("missing value for command"),
            "range" | "with" | "define" | "template" | "block" => {
                return fail(format!(
                    "{{{{{word}}}}} is not supported in VM name templates"
                ));
            }
            _ => nodes.push(Node::Output(parse_pipeline(body)?)),
        }
    }
    Ok((nodes, None))
}

fn parse_if(cond: &str, parts: &[(bool, String)], i: &mut usize) -> Result<Node, TemplateError> {
    let cond = parse_pipeline(cond)?;
    let (then, stop) = parse_list(parts, i)?;
    let otherwise = match stop.as_deref().map(str::trim) {
        Some("end") => Vec::new(),
        Some("else") => {
            let (nodes, stop) = parse_list(parts, i)?;
            if stop.as_deref().map(str::trim) != Some("end") {
                return fail("unexpected EOF: {{else}} without {{end}}");
            }
            nodes
        }
        Some(s) if s.starts_with("else if ") => {
            vec![parse_if(s["else if".len()..].trim(), parts, i)?]
        }
        _ => return fail("unexpected EOF: {{if}} without {{end}}"),
    };
    Ok(Node::If {
        cond,
        then,
        otherwise,
    })
}

/// Tokens of one action: words, string literals, parentheses and pipes.
fn tokens(src: &str) -> Result<Vec<String>, TemplateError> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' || c == ')' || c == '|' {
            out.push(c.to_string());
            i += 1;
        } else if c == '"' || c == '`' {
            let mut j = i + 1;
            let mut lit = String::from(c);
            while j < chars.len() && chars[j] != c {
                if c == '"' && chars[j] == '\\' && j + 1 < chars.len() {
                    lit.push(chars[j]);
                    j += 1;
                }
                lit.push(chars[j]);
                j += 1;
            }
            if j >= chars.len() {
                return fail("unterminated quoted string");
            }
            lit.push(c);
            out.push(lit);
            i = j + 1;
        } else {
            let mut j = i;
            while j < chars.len() && !chars[j].is_whitespace() && !"()|\"`".contains(chars[j]) {
                j += 1;
            }
            out.push(chars[i..j].iter().collect());
            i = j;
        }
    }
    Ok(out)
}

fn parse_pipeline(src: &str) -> Result<Pipeline, TemplateError> {
    let toks = tokens(src)?;
    let mut pos = 0;
    let p = pipeline(&toks, &mut pos)?;
    if pos != toks.len() {
        return fail(format!("unexpected {:?} in command", toks[pos]));
    }
    Ok(p)
}

fn pipeline(toks: &[String], pos: &mut usize) -> Result<Pipeline, TemplateError> {
    let mut cmds = vec![Vec::new()];
    while *pos < toks.len() {
        let t = toks[*pos].as_str();
        match t {
            ")" => break,
            "|" => {
                *pos += 1;
                cmds.push(Vec::new());
                continue;
            }
            "(" => {
                *pos += 1;
                let sub = pipeline(toks, pos)?;
                if toks.get(*pos).map(String::as_str) != Some(")") {
                    return fail("unclosed left paren");
                }
                *pos += 1;
                cmds.last_mut()
                    .expect("one command")
                    .push(Operand::Sub(sub));
                continue;
            }
            _ => {}
        }
        *pos += 1;
        cmds.last_mut().expect("one command").push(operand(t)?);
    }
    if cmds.iter().any(Vec::is_empty) {
        return fail("missing value for command");
    }
    Ok(cmds)
}

fn operand(t: &str) -> Result<Operand, TemplateError> {
    if t == "." {
        return Ok(Operand::Dot);
    }
    if let Some(path) = t.strip_prefix('.') {
        return Ok(Operand::Field(
            path.split('.').map(str::to_string).collect(),
        ));
    }
    if let Some(s) = t.strip_prefix('`').and_then(|s| s.strip_suffix('`')) {
        return Ok(Operand::Str(s.to_string()));
    }
    if t.starts_with('"') {
        return serde_json::from_str::<String>(t)
            .map(Operand::Str)
            .map_err(|_| TemplateError(format!("bad string literal {t}")));
    }
    if let Ok(n) = t.parse::<i64>() {
        return Ok(Operand::Int(n));
    }
    match t {
        "true" => return Ok(Operand::Bool(true)),
        "false" => return Ok(Operand::Bool(false)),
        _ => {}
    }
    if FUNCS.contains(&t) {
        return Ok(Operand::Func(t.to_string()));
    }
    fail(format!("function {t:?} not defined"))
}

fn exec(nodes: &[Node], name: &str, out: &mut String) -> Result<(), TemplateError> {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Output(p) => out.push_str(&eval_pipeline(p, name)?.show()),
            Node::If {
                cond,
                then,
                otherwise,
            } => {
                let branch = if eval_pipeline(cond, name)?.truthy() {
                    then
                } else {
                    otherwise
                };
                exec(branch, name, out)?;
            }
        }
    }
    Ok(())
}

fn eval_pipeline(p: &Pipeline, name: &str) -> Result<Val, TemplateError> {
    let mut last: Option<Val> = None;
    for cmd in p {
        last = Some(eval_command(cmd, name, last.take())?);
    }
    last.ok_or_else(|| TemplateError("empty pipeline".into()))
}

fn eval_operand(o: &Operand, name: &str) -> Result<Val, TemplateError> {
    match o {
        Operand::Dot => Ok(Val::Map("data")),
        Operand::Str(s) => Ok(Val::Str(s.clone())),
        Operand::Int(i) => Ok(Val::Int(*i)),
        Operand::Bool(b) => Ok(Val::Bool(*b)),
        Operand::Sub(p) => eval_pipeline(p, name),
        Operand::Field(path) => match path.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["machine"] => Ok(Val::Map("machine")),
            ["machine", "name"] => Ok(Val::Str(name.to_string())),
            ["machine", other, ..] => fail(format!(
                "executing: map has no entry for key {other:?} (only .machine.name is available)"
            )),
            [other, ..] => fail(format!(
                "executing: map has no entry for key {other:?} (only .machine.name is available)"
            )),
            [] => Ok(Val::Map("data")),
        },
        Operand::Func(f) => fail(format!("{f} is a function, not a value")),
    }
}

fn eval_command(cmd: &Command, name: &str, piped: Option<Val>) -> Result<Val, TemplateError> {
    let Some(Operand::Func(f)) = cmd.first() else {
        if cmd.len() > 1 || piped.is_some() {
            return fail("can't give argument to non-function");
        }
        return eval_operand(&cmd[0], name);
    };
    let mut args = Vec::new();
    for o in &cmd[1..] {
        args.push(eval_operand(o, name)?);
    }
    args.extend(piped);
    call(f, args)
}

fn as_str(v: &Val, f: &str) -> Result<String, TemplateError> {
    match v {
        Val::Str(s) => Ok(s.clone()),
        other => fail(format!(
            "executing {f}: expected a string, got {}",
            other.show()
        )),
    }
}

fn as_int(v: &Val, f: &str) -> Result<i64, TemplateError> {
    match v {
        Val::Int(i) => Ok(*i),
        other => fail(format!(
            "executing {f}: expected an integer, got {}",
            other.show()
        )),
    }
}

fn call(f: &str, args: Vec<Val>) -> Result<Val, TemplateError> {
    let arity = |n: usize| -> Result<(), TemplateError> {
        if args.len() == n {
            Ok(())
        } else {
            fail(format!(
                "wrong number of args for {f}: want {n} got {}",
                args.len()
            ))
        }
    };
    match f {
        "trimSuffix" => {
            arity(2)?;
            let (suffix, s) = (as_str(&args[0], f)?, as_str(&args[1], f)?);
            Ok(Val::Str(s.strip_suffix(&suffix).unwrap_or(&s).to_string()))
        }
        "trunc" => {
            arity(2)?;
            let (c, s) = (as_int(&args[0], f)?, as_str(&args[1], f)?);
            let chars: Vec<char> = s.chars().collect();
            let len = chars.len() as i64;
            let out: String = if c < 0 && len + c > 0 {
                chars[(len + c) as usize..].iter().collect()
            } else if c >= 0 && len > c {
                chars[..c as usize].iter().collect()
            } else {
                s
            };
            Ok(Val::Str(out))
        }
        "len" => {
            arity(1)?;
            Ok(Val::Int(as_str(&args[0], f)?.chars().count() as i64))
        }
        "not" => {
            arity(1)?;
            Ok(Val::Bool(!args[0].truthy()))
        }
        "and" | "or" => {
            if args.is_empty() {
                return fail(format!("wrong number of args for {f}: want at least 1"));
            }
            let want = f == "or";
            let hit = args.iter().find(|a| a.truthy() == want);
            Ok(hit.or(args.last()).cloned().expect("non-empty"))
        }
        _ => {
            arity(2)?;
            let ord = match (&args[0], &args[1]) {
                (Val::Int(a), Val::Int(b)) => a.cmp(b),
                (Val::Str(a), Val::Str(b)) => a.cmp(b),
                (Val::Bool(a), Val::Bool(b)) if matches!(f, "eq" | "ne") => a.cmp(b),
                (a, b) => {
                    return fail(format!(
                        "executing {f}: incompatible types for comparison ({} and {})",
                        a.show(),
                        b.show()
                    ));
                }
            };
            use std::cmp::Ordering::*;
            Ok(Val::Bool(match f {
                "eq" => ord == Equal,
                "ne" => ord != Equal,
                "lt" => ord == Less,
                "le" => ord != Greater,
                "gt" => ord == Greater,
                _ => ord != Less,
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOWS_EXAMPLE: &str = "{{ if le (len .machine.name) 20 }}{{ .machine.name }}{{else}}{{ trimSuffix \"-\" (trunc 14 .machine.name) }}-{{ trunc -5 .machine.name }}{{end}}";

    #[test]
    fn templates_render_as_capv_documents_them() {
        let cases: &[(&str, Option<&str>, &str)] = &[
            ("machine", None, "machine"),
            ("machine", Some("{{ .machine.name }}"), "machine"),
            ("m-1", Some("{{ .machine.name }}-vm"), "m-1-vm"),
            ("short", Some(WINDOWS_EXAMPLE), "short"),
            (
                "cluster-md-containerd-b7fccbf59-2qj6q",
                Some(WINDOWS_EXAMPLE),
                "cluster-md-con-2qj6q",
            ),
            // trunc with a cut that ends on '-' then trimSuffix.
            (
                "abcdefghijklm-opqrstuvwxyz",
                Some(WINDOWS_EXAMPLE),
                "abcdefghijklm-vwxyz",
            ),
            ("x", Some("{{ .machine.name | trunc 3 }}"), "x"),
            ("abcdef", Some("{{ .machine.name | trunc 3 }}"), "abc"),
            ("abc", Some("  {{- .machine.name -}}  "), "abc"),
            (
                "m",
                Some(
                    "{{ if and (eq .machine.name \"m\") (not false) }}yes{{ else if true }}no{{ end }}",
                ),
                "yes",
            ),
        ];
        for (machine, tpl, want) in cases {
            assert_eq!(render_name(machine, *tpl).as_deref(), Ok(*want), "{tpl:?}");
        }
        let long = "a".repeat(80);
        assert_eq!(
            render_name(&long, Some("{{ .machine.name }}"))
                .unwrap()
                .len(),
            63
        );
    }

    #[test]
    fn bad_templates_are_errors_naming_the_problem() {
        for (tpl, says) in [
            ("{{ invalid", "unclosed action"),
            ("{{ invalid }}", "function \"invalid\" not defined"),
            ("{{ .machine.namespace }}", "no entry for key \"namespace\""),
            ("{{ .cluster.name }}", "no entry for key \"cluster\""),
            ("{{ if true }}x", "without {{end}}"),
            ("{{ end }}", "unexpected"),
            ("{{ trunc \"x\" .machine.name }}", "expected an integer"),
            ("{{ range .machine }}{{ end }}", "not supported"),
        ] {
            let e = render_name("m", Some(tpl)).unwrap_err();
            assert!(e.0.contains(says), "{tpl}: {e}");
        }
        assert!(render_name("", None).is_err());
    }

    #[test]
    fn windows_names_keep_head_and_tail_and_never_panic() {
        assert_eq!(
            windows_name("cluster-md-containerd-b7fccbf59-2qj6q"),
            "cluster-m-2qj6q"
        );
        assert_eq!(windows_name("cluster-a-bcdefghij"), "cluster-a-fghij");
        assert_eq!(windows_name("short"), "short");
        assert!(windows_name(&"x".repeat(40)).len() <= 15);
    }
}
