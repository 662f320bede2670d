//! Reading one method of an `#[agents]` trait: which agent its attribute makes, its parameters (inputs, the
//! memory id), its return type and its sub-agents, with every mistake a compile error naming the attribute.

use proc_macro2::Span;
use quote::quote;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, Meta, Pat, Path, ReturnType, TraitItemFn, Type};

use super::kinds::{self, Builder, COMMON, KINDS, Kind, Subs};
use crate::args::{Args, error};
use crate::types::param_key;

/// The attributes of Rust itself a trait method may carry besides its agent attribute: any other attribute of
/// a method without an agent attribute is taken for a misspelt or unknown agent kind.
const RUST_ATTRIBUTES: &[&str] = &[
    "doc",
    "allow",
    "warn",
    "deny",
    "forbid",
    "expect",
    "cfg",
    "cfg_attr",
    "deprecated",
    "must_use",
    "inline",
    "cold",
    "track_caller",
];

/// Whether `attr` is an agent attribute (`#[sequence(..)]`).
fn is_kind(attr: &syn::Attribute) -> bool {
    attr.path().get_ident().is_some_and(|i| kinds::kind(&i.to_string()).is_some())
}

/// One sub-agent named in a composite: a method of the trait, or an `#[agent]` function elsewhere (a path).
pub(super) enum Sub {
    /// A method of the trait, by name.
    Method(Ident),
    /// An `#[agent]` function, by path.
    External(Path),
}

/// One method of the trait, read.
pub(super) struct Method {
    pub(super) ident: Ident,
    /// The agent's name (the method's, unless `name = ".."`).
    pub(super) name: String,
    /// Doc and other attributes kept on the trait method.
    pub(super) attrs: Vec<syn::Attribute>,
    pub(super) params: Vec<(String, Ident, Type)>,
    /// The `#[memory_id]` parameter: its position among the parameters, name and type.
    pub(super) memory_id: Option<(usize, Ident, Type)>,
    /// The return type (`()` when none).
    pub(super) output: Type,
    pub(super) args: Args,
    /// Its kind's descriptor: the keys its attribute takes and the builder that makes it.
    pub(super) kind: &'static Kind,
    /// The sub-agents (composites), including the branches' of a conditional.
    pub(super) subs: Vec<Sub>,
}

impl Method {
    /// Whether it has no sub-agents (an LLM agent or a human).
    pub(super) fn is_leaf(&self) -> bool {
        self.kind.subs == Subs::Leaf
    }

    /// Whether it needs a chat model (an LLM agent, a supervisor's planner, a decision router's).
    pub(super) fn has_model(&self) -> bool {
        self.kind.model
    }
}

pub(super) fn is_unit(ty: &Type) -> bool {
    matches!(ty, Type::Tuple(t) if t.elems.is_empty())
}

/// Reads one trait method.
pub(super) fn read_method(f: &TraitItemFn) -> syn::Result<Method> {
    let ident = f.sig.ident.clone();
    let kinds: Vec<&syn::Attribute> = f.attrs.iter().filter(|a| is_kind(a)).collect();
    let attr = match kinds.as_slice() {
        [one] => *one,
        [] => {
            let unknown = f.attrs.iter().find_map(|a| {
                a.path().get_ident().map(ToString::to_string).filter(|i| !RUST_ATTRIBUTES.contains(&i.as_str()))
            });
            if let Some(unknown) = unknown {
                let known = KINDS.iter().map(|k| format!("`{}`", k.name)).collect::<Vec<_>>().join(", ");
                let at = f.attrs.iter().find(|a| a.path().is_ident(&unknown)).map_or(f.sig.span(), |a| a.path().span());
                return Err(error(
                    at,
                    format!("`#[agents]`: method `{ident}`: unknown agent kind `#[{unknown}]` (the kinds: {known})"),
                ));
            }
            return Err(error(
                f.sig.span(),
                format!(
                    "`#[agents]`: method `{ident}` needs an agent attribute: `#[agent(user = \"..\", output_key = \
                     \"..\")]` (an LLM agent), `#[human(prompt = \"..\", output_key = \"..\")]` or a composite \
                     (`#[sequence(agents(..), output_key = \"..\")]`, `#[looping]`, `#[parallel]`, \
                     `#[conditional]`, `#[supervisor]`, the pattern planners)"
                ),
            ));
        }
        [_, second, ..] => {
            return Err(error(second.span(), format!("`#[agents]`: method `{ident}` has two agent attributes")));
        }
    };
    let args = Args::of_attribute(attr)?;
    let kind = args.attr.clone();
    let at = |span: Span, message: String| error(span, format!("`#[{kind}]` on `{ident}`: {message}"));
    let Some(spec) = kinds::kind(&kind) else {
        return Err(at(attr.span(), "not an agent kind".to_string()));
    };
    if f.default.is_some() {
        let what = if spec.subs != Subs::Leaf {
            "its sub-agents answer it"
        } else if spec.builder == Builder::Human {
            "a person answers it"
        } else {
            "the model answers it"
        };
        return Err(at(f.default.span(), format!("a method of an `#[agents]` trait has no body: {what}")));
    }
    if f.sig.asyncness.is_none() {
        return Err(at(f.sig.fn_token.span(), "declare the method `async fn`".to_string()));
    }
    if !f.sig.generics.params.is_empty() {
        return Err(at(f.sig.generics.span(), "an agent method cannot be generic".to_string()));
    }
    match f.sig.receiver() {
        Some(r) if r.reference.is_some() && r.mutability.is_none() => {}
        _ => return Err(at(f.sig.span(), "an agent method takes `&self`".to_string())),
    }
    let mut params = Vec::new();
    let mut memory_id = None;
    for (position, arg) in f.sig.inputs.iter().filter(|a| matches!(a, FnArg::Typed(_))).enumerate() {
        let FnArg::Typed(pat) = arg else { continue };
        let Pat::Ident(p) = &*pat.pat else {
            return Err(at(pat.pat.span(), "a parameter must be a plain name: it names the state key".to_string()));
        };
        if let Some(attr) = pat.attrs.iter().find(|a| a.path().is_ident("resource")) {
            return Err(at(
                attr.span(),
                "`#[resource]` goes on a parameter of an `#[agent]` function (named here as `self::f`); a method's \
                 parameters are the call's inputs"
                    .to_string(),
            ));
        }
        if let Some(attr) = pat.attrs.iter().find(|a| a.path().is_ident("memory_id")) {
            if memory_id.is_some() {
                return Err(at(attr.span(), "a method takes one `#[memory_id]` parameter".to_string()));
            }
            memory_id = Some((position, p.ident.clone(), (*pat.ty).clone()));
            continue;
        }
        let key = param_key(&mut pat.attrs.clone(), &p.ident)?;
        params.push((key, p.ident.clone(), (*pat.ty).clone()));
    }
    let output = match &f.sig.output {
        ReturnType::Default => syn::parse_quote!(()),
        ReturnType::Type(_, ty) => (**ty).clone(),
    };
    let mut subs = Vec::new();
    args.only(&[COMMON, spec.keys].concat())?;
    for (key, what) in spec.required {
        if args.get_meta(key).is_none() {
            return Err(at(args.span, format!("missing {what}")));
        }
    }
    match spec.subs {
        Subs::Leaf => {
            if is_unit(&output) {
                let what = if spec.builder == Builder::Human {
                    "a human step returns the answer"
                } else {
                    "an LLM agent returns its answer"
                };
                return Err(at(f.sig.span(), format!("{what}: give the method a return type")));
            }
        }
        Subs::Desires => {
            for desire in args.all("desire") {
                let Meta::List(list) = desire else {
                    return Err(at(
                        desire.span(),
                        "`desire` takes `desire(name = \"..\", priority = N, ..)`".to_string(),
                    ));
                };
                let inner = Args::parse("bdi", list.span(), list.tokens.clone())?;
                inner.only(&[
                    "name",
                    "priority",
                    "satisfied",
                    "satisfied_key",
                    "achievable",
                    "achievable_key",
                    "agents",
                ])?;
                if inner.string("name")?.is_none() {
                    return Err(at(list.span(), "a desire needs `name = \"..\"`".to_string()));
                }
                if inner.get_meta("priority").is_none() {
                    return Err(at(
                        list.span(),
                        "a desire needs `priority = N` (higher is more important)".to_string(),
                    ));
                }
                match (inner.path("satisfied")?.is_some(), inner.string("satisfied_key")?.is_some()) {
                    (true, true) => {
                        return Err(at(
                            list.span(),
                            "a desire takes `satisfied = f` or `satisfied_key`, not both".into(),
                        ));
                    }
                    (false, false) => {
                        return Err(at(
                            list.span(),
                            "a desire needs `satisfied = f` (a `fn(&ScopeView) -> bool`) or `satisfied_key = \"..\"`"
                                .to_string(),
                        ));
                    }
                    _ => {}
                }
                if inner.path("achievable")?.is_some() && inner.string("achievable_key")?.is_some() {
                    return Err(at(
                        list.span(),
                        "a desire takes `achievable = f` or `achievable_key`, not both".to_string(),
                    ));
                }
                match inner.paths("agents")? {
                    Some(paths) if !paths.is_empty() => subs.extend(paths.into_iter().map(sub_of)),
                    _ => return Err(at(list.span(), "a desire needs `agents(..)`: its intention".to_string())),
                }
            }
        }
        Subs::Branches => {
            for branch in args.all("branch") {
                let Meta::List(list) = branch else {
                    return Err(at(branch.span(), "`branch` takes `branch(when = condition, agents(..))`".to_string()));
                };
                let inner = Args::parse("conditional", list.span(), list.tokens.clone())?;
                inner.only(&["when", "agents"])?;
                if inner.path("when")?.is_none() {
                    return Err(at(
                        list.span(),
                        "a branch needs `when = condition` (a `fn(&ScopeView) -> bool`)".into(),
                    ));
                }
                match inner.paths("agents")? {
                    Some(paths) => subs.extend(paths.into_iter().map(sub_of)),
                    None => return Err(at(list.span(), "a branch needs `agents(..)`".to_string())),
                }
            }
        }
        Subs::Mapped => {
            subs.extend(args.path("agent")?.map(sub_of));
            args.string("items_key")?;
        }
        Subs::Debaters => {
            match args.paths("debaters")? {
                Some(paths) if !paths.is_empty() => subs.extend(paths.into_iter().map(sub_of)),
                _ => return Err(at(args.span, format!("missing {}", spec.missing("debaters")))),
            }
            subs.extend(args.path("judge")?.map(sub_of));
        }
        Subs::Agents => match args.paths("agents")? {
            Some(paths) if !paths.is_empty() => subs.extend(paths.into_iter().map(sub_of)),
            _ => return Err(at(args.span, format!("missing {}", spec.missing("agents")))),
        },
    }
    for prefer in args.all("prefer") {
        let Meta::List(list) = prefer else {
            return Err(at(prefer.span(), "`prefer` takes `prefer(agent = a, when = condition)`".to_string()));
        };
        let inner = Args::parse("blackboard", list.span(), list.tokens.clone())?;
        inner.only(&["agent", "when"])?;
        let Some(agent) = inner.path("agent")? else {
            return Err(at(list.span(), "a preference needs `agent = a`: one of the `agents(..)`".to_string()));
        };
        let listed = subs.iter().any(|s| match (s, agent.get_ident()) {
            (Sub::Method(m), Some(a)) => m == a,
            (Sub::External(p), _) => quote!(#p).to_string() == quote!(#agent).to_string(),
            _ => false,
        });
        if !listed {
            let named = quote!(#agent).to_string().replace(' ', "");
            let last = agent.segments.last().map(|s| s.ident.to_string());
            let same_name = subs.iter().find_map(|s| match s {
                Sub::External(p) if p.segments.last().map(|s| s.ident.to_string()) == last => {
                    Some(quote!(#p).to_string().replace(' ', ""))
                }
                Sub::Method(m) if Some(m.to_string()) == last => Some(m.to_string()),
                _ => None,
            });
            let hint = same_name.map(|n| format!(": write it as in `agents(..)`, `agent = {n}`")).unwrap_or_default();
            return Err(at(agent.span(), format!("preferred agent `{named}` is not one of the `agents(..)`{hint}")));
        }
    }
    if spec.builder == Builder::Voting
        && let Some(r) = args.string("strategy")?
        && !["majority", "average", "highest"].contains(&r.value().as_str())
    {
        return Err(at(
            r.span(),
            format!("unknown strategy `{}` (expected `majority`, `average` or `highest`)", r.value()),
        ));
    }
    // A composite computing its result (`output = f`) returns it without a key; every other agent writes it.
    let leaf = spec.subs == Subs::Leaf;
    if args.string("output_key")?.is_none() && !is_unit(&output) && (leaf || args.path("output")?.is_none()) {
        let hint = if leaf { "" } else { " (or computed from the final state with `output = f`)" };
        return Err(at(
            args.span,
            format!("missing `output_key = \"..\"`: the state key the result of `{ident}` is written to{hint}"),
        ));
    }
    if spec.builder == Builder::Supervisor
        && let Some(r) = args.string("response")?
        && !["last", "summary", "scored"].contains(&r.value().as_str())
    {
        return Err(at(r.span(), format!("unknown response `{}` (expected `last`, `summary` or `scored`)", r.value())));
    }
    let name = args.string("name")?.map(|s| s.value()).unwrap_or_else(|| ident.to_string());
    let attrs = f.attrs.iter().filter(|a| !is_kind(a)).cloned().collect();
    Ok(Method { ident, name, attrs, params, memory_id, output, args, kind: spec, subs })
}

pub(super) fn sub_of(path: Path) -> Sub {
    match path.get_ident() {
        Some(ident) => Sub::Method(ident.clone()),
        None => Sub::External(path),
    }
}
