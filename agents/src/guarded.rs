//! Which variables a template or expression reads only where a missing one is harmless: through
//! `default(..)` (`{{ n | default(0) }}`), in an `is defined` / `is undefined` test, or inside the branch such
//! a test guards (`{% if place is defined %}{{ place }}{% endif %}`). Such a variable is an optional input: a
//! run without it renders the default or skips the branch, where any other read of a missing variable is an
//! error (semi-strict mode, [`crate::Expression`]).
//!
//! This reads minijinja's syntax tree (`minijinja::machinery`, the `unstable_machinery` feature of the pinned
//! version). A construct it does not follow (macros, call blocks, imports) makes every variable count as
//! needed: it never calls a needed variable optional.

use std::collections::HashSet;

use minijinja::machinery::ast::{BinOpKind, CallArg, Expr, Stmt, UnaryOpKind};

/// The variables of template `source` that are read only where a missing one is harmless; empty when it
/// does not parse.
pub(crate) fn template_optional(source: &str) -> HashSet<String> {
    match minijinja::machinery::parse(source, "t", Default::default()) {
        Ok(stmt) => {
            let mut walk = Walk::default();
            walk.stmt(&stmt);
            walk.optional()
        }
        Err(_) => HashSet::new(),
    }
}

/// The variables of expression `source` that are read only where a missing one is harmless; empty when it
/// does not parse.
pub(crate) fn expression_optional(source: &str) -> HashSet<String> {
    match minijinja::machinery::parse_expr(source) {
        Ok(expr) => {
            let mut walk = Walk::default();
            walk.expr(&expr);
            walk.optional()
        }
        Err(_) => HashSet::new(),
    }
}

/// The constants expression `source` can evaluate to (`none` left out), as JSON: the expression itself when it
/// is one, and those of the branches of `a if c else b`, of the operands of `and` / `or` (which give an
/// operand), and of `default(..)`'s argument and operand; empty when it does not parse. A value computed any
/// other way (`name ~ "-large"`, a state key) is not known here.
pub(crate) fn expression_results(source: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    if let Ok(expr) = minijinja::machinery::parse_expr(source) {
        results(&expr, &mut out);
    }
    out
}

fn results(expr: &Expr<'_>, out: &mut Vec<serde_json::Value>) {
    match expr {
        Expr::Const(c) => {
            if c.value.is_none() || c.value.is_undefined() {
                return;
            }
            if let Ok(v) = serde_json::to_value(&c.value)
                && !out.contains(&v)
            {
                out.push(v);
            }
        }
        Expr::IfExpr(i) => {
            results(&i.true_expr, out);
            if let Some(e) = &i.false_expr {
                results(e, out);
            }
        }
        Expr::BinOp(b) if matches!(b.op, BinOpKind::ScAnd | BinOpKind::ScOr) => {
            results(&b.left, out);
            results(&b.right, out);
        }
        // No name either: a list, a mapping, a negated number (values of their own, shown as such).
        Expr::List(l) => {
            let items = l.items.iter().map(|i| constant(i).unwrap_or(serde_json::Value::Null)).collect();
            out.push(serde_json::Value::Array(items));
        }
        Expr::Map(_) => out.push(serde_json::Value::Object(serde_json::Map::new())),
        Expr::UnaryOp(u) if matches!(u.op, UnaryOpKind::Neg) => {
            let negated = constant(&u.expr).and_then(|v| match v.as_i64() {
                Some(i) => Some(serde_json::json!(-i)),
                None => v.as_f64().map(|n| serde_json::json!(-n)),
            });
            out.push(negated.unwrap_or(serde_json::Value::Null));
        }
        Expr::Filter(f) if matches!(f.name, "default" | "d") => {
            if let Some(e) = &f.expr {
                results(e, out);
            }
            if let Some(CallArg::Pos(e)) = f.args.first() {
                results(e, out);
            }
        }
        _ => {}
    }
}

/// The JSON of a constant expression, if it is one.
fn constant(expr: &Expr<'_>) -> Option<serde_json::Value> {
    match expr {
        Expr::Const(c) => serde_json::to_value(&c.value).ok(),
        _ => None,
    }
}

#[derive(Default)]
struct Walk<'a> {
    /// Names the template assigns (`set`, loop targets, `with`), innermost scope last: not state variables.
    assigned: Vec<HashSet<&'a str>>,
    /// Names known to be defined here (inside `{% if x is defined %}`), innermost last.
    defined: Vec<HashSet<&'a str>>,
    /// Variables read where a missing one is an error.
    needed: HashSet<&'a str>,
    /// Variables read only where a missing one is harmless (so far).
    guarded: HashSet<&'a str>,
    /// A construct this walk does not follow was met: nothing is optional.
    opaque: bool,
}

impl<'a> Walk<'a> {
    fn optional(self) -> HashSet<String> {
        if self.opaque {
            return HashSet::new();
        }
        self.guarded.difference(&self.needed).map(|v| v.to_string()).collect()
    }

    fn is_assigned(&self, name: &str) -> bool {
        self.assigned.iter().any(|s| s.contains(name))
    }

    fn is_defined(&self, name: &str) -> bool {
        self.defined.iter().any(|s| s.contains(name))
    }

    fn read(&mut self, name: &'a str, guarded: bool) {
        if self.is_assigned(name) {
            return;
        }
        if guarded || self.is_defined(name) {
            self.guarded.insert(name);
        } else {
            self.needed.insert(name);
        }
    }

    fn assign(&mut self, target: &Expr<'a>) {
        match target {
            Expr::Var(v) => {
                if self.assigned.is_empty() {
                    self.assigned.push(HashSet::new());
                }
                if let Some(scope) = self.assigned.last_mut() {
                    scope.insert(v.id);
                }
            }
            Expr::List(l) => l.items.iter().for_each(|i| self.assign(i)),
            Expr::Tuple(t) => t.items.iter().for_each(|i| self.assign(i)),
            _ => {}
        }
    }

    /// Walks `body` in a scope of its own where `defined` are known to be defined.
    fn scoped(&mut self, defined: HashSet<&'a str>, body: &[Stmt<'a>]) {
        self.assigned.push(HashSet::new());
        self.defined.push(defined);
        body.iter().for_each(|s| self.stmt(s));
        self.defined.pop();
        self.assigned.pop();
    }

    /// Walks `expr` with `defined` known to be defined.
    fn expr_with(&mut self, defined: HashSet<&'a str>, expr: &Expr<'a>) {
        self.defined.push(defined);
        self.expr(expr);
        self.defined.pop();
    }

    fn stmt(&mut self, stmt: &Stmt<'a>) {
        match stmt {
            Stmt::Template(t) => t.children.iter().for_each(|s| self.stmt(s)),
            Stmt::EmitExpr(e) => self.expr(&e.expr),
            Stmt::EmitRaw(_) => {}
            Stmt::ForLoop(f) => {
                self.expr(&f.iter);
                self.assigned.push(HashSet::from(["loop"]));
                self.assign(&f.target);
                if let Some(filter) = &f.filter_expr {
                    self.expr(filter);
                }
                f.body.iter().for_each(|s| self.stmt(s));
                self.assigned.pop();
                self.scoped(HashSet::new(), &f.else_body);
            }
            Stmt::IfCond(i) => {
                self.expr(&i.expr);
                let (when_true, when_false) = defined_by(&i.expr);
                self.scoped(when_true, &i.true_body);
                self.scoped(when_false, &i.false_body);
            }
            Stmt::WithBlock(w) => {
                self.assigned.push(HashSet::new());
                for (target, value) in &w.assignments {
                    self.expr(value);
                    self.assign(target);
                }
                w.body.iter().for_each(|s| self.stmt(s));
                self.assigned.pop();
            }
            Stmt::Set(s) => {
                self.expr(&s.expr);
                self.assign(&s.target);
            }
            Stmt::SetBlock(s) => {
                self.scoped(HashSet::new(), &s.body);
                if let Some(filter) = &s.filter {
                    self.expr(filter);
                }
                self.assign(&s.target);
            }
            Stmt::AutoEscape(a) => self.scoped(HashSet::new(), &a.body),
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter);
                self.scoped(HashSet::new(), &f.body);
            }
            Stmt::Continue(_) | Stmt::Break(_) => {}
            Stmt::Do(d) => {
                self.expr(&d.call.expr);
                self.args(&d.call.args);
            }
            _ => self.opaque = true,
        }
    }

    fn args(&mut self, args: &[CallArg<'a>]) {
        for arg in args {
            match arg {
                CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) | CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }

    fn expr(&mut self, expr: &Expr<'a>) {
        match expr {
            Expr::Var(v) => self.read(v.id, false),
            Expr::Const(_) => {}
            Expr::Slice(s) => {
                self.expr(&s.expr);
                for e in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(e);
                }
            }
            Expr::UnaryOp(u) => self.expr(&u.expr),
            Expr::BinOp(b) => {
                self.expr(&b.left);
                // `x is defined and x > 1`: the right side runs only when the left is true (or false, for
                // `or`).
                let (when_true, when_false) = defined_by(&b.left);
                match b.op {
                    BinOpKind::ScAnd => self.expr_with(when_true, &b.right),
                    BinOpKind::ScOr => self.expr_with(when_false, &b.right),
                    _ => self.expr(&b.right),
                }
            }
            Expr::Compare(c) => {
                self.expr(&c.expr);
                c.ops.iter().for_each(|op| self.expr(&op.expr));
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr);
                let (when_true, when_false) = defined_by(&i.test_expr);
                self.expr_with(when_true, &i.true_expr);
                if let Some(e) = &i.false_expr {
                    self.expr_with(when_false, e);
                }
            }
            Expr::Filter(f) => {
                match (&f.expr, f.name) {
                    (Some(Expr::Var(v)), "default" | "d") => self.read(v.id, true),
                    (Some(e), _) => self.expr(e),
                    (None, _) => {}
                }
                self.args(&f.args);
            }
            Expr::Test(t) => {
                match (&t.expr, t.name) {
                    (Expr::Var(v), "defined" | "undefined") => self.read(v.id, true),
                    (e, _) => self.expr(e),
                }
                self.args(&t.args);
            }
            Expr::GetAttr(g) => self.expr(&g.expr),
            Expr::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            Expr::Call(c) => {
                self.expr(&c.expr);
                self.args(&c.args);
            }
            Expr::List(l) => l.items.iter().for_each(|e| self.expr(e)),
            Expr::Tuple(t) => t.items.iter().for_each(|e| self.expr(e)),
            Expr::Map(m) => {
                m.keys.iter().for_each(|e| self.expr(e));
                m.values.iter().for_each(|e| self.expr(e));
            }
        }
    }
}

/// The variables a condition proves defined when it is true, and when it is false: `x is defined` (true),
/// `x is undefined` / `x is not defined` (false), and `and` / `or` / `not` of those.
fn defined_by<'a>(cond: &Expr<'a>) -> (HashSet<&'a str>, HashSet<&'a str>) {
    match cond {
        Expr::Test(t) => match (&t.expr, t.name) {
            (Expr::Var(v), "defined") => (HashSet::from([v.id]), HashSet::new()),
            (Expr::Var(v), "undefined") => (HashSet::new(), HashSet::from([v.id])),
            _ => (HashSet::new(), HashSet::new()),
        },
        Expr::UnaryOp(u) if matches!(u.op, UnaryOpKind::Not) => {
            let (t, f) = defined_by(&u.expr);
            (f, t)
        }
        Expr::BinOp(b) if matches!(b.op, BinOpKind::ScAnd) => {
            let (lt, _) = defined_by(&b.left);
            let (rt, _) = defined_by(&b.right);
            (lt.union(&rt).copied().collect(), HashSet::new())
        }
        Expr::BinOp(b) if matches!(b.op, BinOpKind::ScOr) => {
            let (_, lf) = defined_by(&b.left);
            let (_, rf) = defined_by(&b.right);
            (HashSet::new(), lf.union(&rf).copied().collect())
        }
        _ => (HashSet::new(), HashSet::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(set: HashSet<String>) -> Vec<String> {
        let mut v: Vec<String> = set.into_iter().collect();
        v.sort();
        v
    }

    #[test]
    fn the_values_an_expression_can_give_are_its_constants_in_result_position() {
        let r = |source: &str| expression_results(source).into_iter().map(|v| v.to_string()).collect::<Vec<String>>();
        assert_eq!(r("'strong' if request | length > 200 else 'small'"), ["\"strong\"", "\"small\""]);
        assert_eq!(r("'tiny' if a else ('big' if b else none)"), ["\"tiny\"", "\"big\""]);
        assert_eq!(r("hint or 'small'"), ["\"small\""]);
        assert_eq!(r("tier | default('fast')"), ["\"fast\""]);
        assert_eq!(r("'only'"), ["\"only\""]);
        assert_eq!(r("'a' if x else 7"), ["\"a\"", "7"]);
        assert_eq!(r("['small'] if x else -7"), ["[\"small\"]", "-7"]);
        assert_eq!(r("{'a': 1}"), ["{}"]);
        // Compared strings are no results; a computed name is not known.
        assert_eq!(r("tier == 'gold'"), Vec::<String>::new());
        assert_eq!(r("name ~ '-large'"), Vec::<String>::new());
        assert_eq!(r("'x' if"), Vec::<String>::new());
    }

    #[test]
    fn a_variable_read_only_through_default_or_under_is_defined_is_optional() {
        assert_eq!(sorted(template_optional("{{ n | default(0) }} {{ place | d('agentic') }}")), ["n", "place"]);
        assert_eq!(sorted(template_optional("{{ n | default(0) }} and {{ n }}")), Vec::<String>::new());
        assert_eq!(sorted(template_optional("{% if who is defined %}Hi {{ who | upper }}{% endif %}")), ["who"]);
        assert_eq!(sorted(template_optional("{% if who is not defined %}-{% else %}{{ who }}{% endif %}")), ["who"]);
        assert_eq!(sorted(template_optional("{% if who is defined %}{% endif %}{{ who }}")), Vec::<String>::new());
        assert_eq!(sorted(template_optional("{% set n = 1 %}{{ n }}{{ m | default(n) }}")), ["m"]);
        assert_eq!(
            sorted(template_optional("{% for x in xs %}{{ x | default(1) }}{% endfor %}")),
            Vec::<String>::new()
        );
        // A macro is not followed: nothing is called optional.
        assert_eq!(
            sorted(template_optional("{% macro m() %}{{ v }}{% endmacro %}{{ v | default(1) }}")),
            Vec::<String>::new()
        );
        assert_eq!(sorted(expression_optional("limit is defined and total > limit")), ["limit"]);
        assert_eq!(sorted(expression_optional("x if x is defined else 0")), ["x"]);
        assert_eq!(sorted(expression_optional("(n | default(0)) + m")), ["n"]);
        assert_eq!(sorted(expression_optional("a +")), Vec::<String>::new());
    }
}
