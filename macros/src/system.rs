//! `#[agents]` on a trait: each method is an agent — an LLM agent (`#[agent(user = .., ..)]`) or a composite
//! over the trait's other agents (`#[sequence]`, `#[looping]`, `#[parallel]`, `#[conditional]`,
//! `#[supervisor]`) — and a typed call. Generates `<Trait>Agents` (the agents, implementing the trait) and
//! `<Trait>AgentsBuilder` (the chat models: one for all, or one per agent).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemTrait, LitStr, Meta, Pat, Path, ReturnType, TraitItem, TraitItemFn, Type};

use crate::args::{Args, error, paths_of};
use crate::types::{doc_summary, option_inner, param_key};

/// The attributes that make a method an agent.
const KINDS: &[&str] = &[
    "agent",
    "sequence",
    "looping",
    "parallel",
    "conditional",
    "supervisor",
    "parallel_mapper",
    "goap",
    "p2p",
    "blackboard",
    "voting",
    "debate",
    "human",
    "bdi",
    "decision_router",
];

/// Keys every agent attribute takes.
const COMMON: &[&str] = &["output_key", "description", "name"];

/// One sub-agent named in a composite: a method of the trait, or an `#[agent]` function elsewhere (a path).
enum Sub {
    Method(Ident),
    External(Path),
}

/// One method of the trait, read.
struct Method {
    ident: Ident,
    /// The agent's name (the method's, unless `name = ".."`).
    name: String,
    /// Doc and other attributes kept on the trait method.
    attrs: Vec<syn::Attribute>,
    params: Vec<(String, Ident, Type)>,
    /// The `#[memory_id]` parameter: its position among the parameters, name and type.
    memory_id: Option<(usize, Ident, Type)>,
    /// The return type (`()` when none).
    output: Type,
    args: Args,
    /// The sub-agents (composites), including the branches' of a conditional.
    subs: Vec<Sub>,
}

impl Method {
    fn kind(&self) -> &str {
        &self.args.attr
    }

    /// Whether it has no sub-agents (an LLM agent or a human).
    fn is_leaf(&self) -> bool {
        matches!(self.kind(), "agent" | "human")
    }

    /// Whether it needs a chat model (an LLM agent, a supervisor's planner, a decision router's).
    fn has_model(&self) -> bool {
        matches!(self.kind(), "agent" | "supervisor" | "decision_router")
    }
}

fn is_unit(ty: &Type) -> bool {
    matches!(ty, Type::Tuple(t) if t.elems.is_empty())
}

/// Reads one trait method.
fn read_method(f: &TraitItemFn) -> syn::Result<Method> {
    let ident = f.sig.ident.clone();
    let kinds: Vec<&syn::Attribute> = f.attrs.iter().filter(|a| KINDS.iter().any(|k| a.path().is_ident(k))).collect();
    let attr = match kinds.as_slice() {
        [one] => *one,
        [] => {
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
    if f.default.is_some() {
        let what = match kind.as_str() {
            "agent" => "the model answers it",
            "human" => "a person answers it",
            _ => "its sub-agents answer it",
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
    let keys: Vec<&str> = match kind.as_str() {
        "agent" => {
            vec!["system", "user", "max_tokens", "temperature", "optional", "streaming", "memory_window", "inputs"]
        }
        "human" => vec!["prompt", "response_id", "inputs", "optional"],
        "bdi" => vec!["desire", "max_invocations", "output"],
        "decision_router" => vec!["agents", "threshold", "max_retries", "request_key", "output"],
        "sequence" => vec!["agents", "output"],
        "looping" => vec!["agents", "output", "max_iterations", "exit", "at_end"],
        "parallel" => vec!["agents", "output", "max_concurrency"],
        "conditional" => vec!["branch", "output"],
        "supervisor" => vec!["agents", "max_invocations", "max_retries", "response", "context", "request_key"],
        "parallel_mapper" => vec!["agent", "items_key", "item_key", "max_concurrency", "output"],
        "goap" => vec!["agents", "output"],
        "p2p" => vec!["agents", "max_invocations", "exit", "output"],
        "blackboard" => vec!["agents", "goal", "max_invocations", "prefer", "output"],
        "voting" => vec!["agents", "strategy", "aggregate", "output"],
        _ => vec!["debaters", "judge", "max_rounds", "converged", "output"],
    };
    args.only(&[COMMON, keys.as_slice()].concat())?;
    if kind == "agent" {
        if args.text("user")?.is_none() {
            return Err(at(args.span, "missing `user = \"..\"`: the user message template".to_string()));
        }
        if is_unit(&output) {
            return Err(at(f.sig.span(), "an LLM agent returns its answer: give the method a return type".to_string()));
        }
    } else if kind == "human" {
        if args.text("prompt")?.is_none() {
            return Err(at(args.span, "missing `prompt = \"..\"`: the question the person is asked".to_string()));
        }
        if is_unit(&output) {
            return Err(at(f.sig.span(), "a human step returns the answer: give the method a return type".to_string()));
        }
    } else if kind == "bdi" {
        for desire in args.all("desire") {
            let Meta::List(list) = desire else {
                return Err(at(desire.span(), "`desire` takes `desire(name = \"..\", priority = N, ..)`".to_string()));
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
                return Err(at(list.span(), "a desire needs `priority = N` (higher is more important)".to_string()));
            }
            match (inner.path("satisfied")?.is_some(), inner.string("satisfied_key")?.is_some()) {
                (true, true) => {
                    return Err(at(list.span(), "a desire takes `satisfied = f` or `satisfied_key`, not both".into()));
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
        if subs.is_empty() {
            return Err(at(args.span, "missing `desire(name = \"..\", priority = N, .., agents(..))`".to_string()));
        }
    } else if kind == "conditional" {
        for branch in args.all("branch") {
            let Meta::List(list) = branch else {
                return Err(at(branch.span(), "`branch` takes `branch(when = condition, agents(..))`".to_string()));
            };
            let inner = Args::parse("conditional", list.span(), list.tokens.clone())?;
            inner.only(&["when", "agents"])?;
            if inner.path("when")?.is_none() {
                return Err(at(list.span(), "a branch needs `when = condition` (a `fn(&ScopeView) -> bool`)".into()));
            }
            match inner.paths("agents")? {
                Some(paths) => subs.extend(paths.into_iter().map(sub_of)),
                None => return Err(at(list.span(), "a branch needs `agents(..)`".to_string())),
            }
        }
        if subs.is_empty() {
            return Err(at(args.span, "missing `branch(when = condition, agents(..))`".to_string()));
        }
    } else if kind == "parallel_mapper" {
        match args.path("agent")? {
            Some(path) => subs.push(sub_of(path)),
            None => return Err(at(args.span, "missing `agent = ..`: the agent mapped over the items".to_string())),
        }
        if args.string("items_key")?.is_none() {
            return Err(at(args.span, "missing `items_key = \"..\"`: the state key holding the list".to_string()));
        }
    } else if kind == "debate" {
        match args.paths("debaters")? {
            Some(paths) if !paths.is_empty() => subs.extend(paths.into_iter().map(sub_of)),
            _ => return Err(at(args.span, "missing `debaters(..)`: the debaters, by method name".to_string())),
        }
        match args.path("judge")? {
            Some(path) => subs.push(sub_of(path)),
            None => return Err(at(args.span, "missing `judge = ..`: the agent deciding the answer".to_string())),
        }
    } else {
        match args.paths("agents")? {
            Some(paths) if !paths.is_empty() => subs.extend(paths.into_iter().map(sub_of)),
            _ => return Err(at(args.span, "missing `agents(..)`: the sub-agents, by method name".to_string())),
        }
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
    if kind == "voting"
        && let Some(r) = args.string("strategy")?
        && !["majority", "average", "highest"].contains(&r.value().as_str())
    {
        return Err(at(
            r.span(),
            format!("unknown strategy `{}` (expected `majority`, `average` or `highest`)", r.value()),
        ));
    }
    // A composite computing its result (`output = f`) returns it without a key; every other agent writes it.
    let leaf = matches!(kind.as_str(), "agent" | "human");
    if args.string("output_key")?.is_none() && !is_unit(&output) && (leaf || args.path("output")?.is_none()) {
        let hint = if leaf { "" } else { " (or computed from the final state with `output = f`)" };
        return Err(at(
            args.span,
            format!("missing `output_key = \"..\"`: the state key the result of `{ident}` is written to{hint}"),
        ));
    }
    if kind == "supervisor"
        && let Some(r) = args.string("response")?
        && !["last", "summary", "scored"].contains(&r.value().as_str())
    {
        return Err(at(r.span(), format!("unknown response `{}` (expected `last`, `summary` or `scored`)", r.value())));
    }
    let name = args.string("name")?.map(|s| s.value()).unwrap_or_else(|| ident.to_string());
    let attrs = f.attrs.iter().filter(|a| !KINDS.iter().any(|k| a.path().is_ident(k))).cloned().collect();
    Ok(Method { ident, name, attrs, params, memory_id, output, args, subs })
}

fn sub_of(path: Path) -> Sub {
    match path.get_ident() {
        Some(ident) => Sub::Method(ident.clone()),
        None => Sub::External(path),
    }
}

/// Expands `#[agents]` on a trait.
pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let item: ItemTrait = syn::parse2(item).map_err(|e| error(e.span(), "`#[agents]` goes on a trait"))?;
    let args = Args::parse("agents", Span::call_site(), attr)?;
    args.only(&["crate"])?;
    let krate = crate::types::krate(&args)?;
    let private = quote!(#krate::__private);
    let trait_ident = &item.ident;
    if !item.generics.params.is_empty() {
        return Err(error(
            item.generics.span(),
            format!("`#[agents]` on `{trait_ident}`: the trait cannot be generic"),
        ));
    }
    let mut methods = Vec::new();
    for entry in &item.items {
        match entry {
            TraitItem::Fn(f) => methods.push(read_method(f)?),
            other => {
                return Err(error(other.span(), "`#[agents]`: the trait holds agent methods only"));
            }
        }
    }
    let order = build_order(trait_ident, &methods)?;

    let vis = &item.vis;
    let agents_ident = format_ident!("{}Agents", trait_ident);
    let builder_ident = format_ident!("{}AgentsBuilder", trait_ident);
    let var = |ident: &Ident| format_ident!("__agent_{}", ident);
    let model_field = |ident: &Ident| format_ident!("{}_model", ident);

    // The trait, its methods as typed calls.
    let mut trait_methods = Vec::new();
    let mut impl_methods = Vec::new();
    for m in &methods {
        let Method { ident, attrs, output, .. } = m;
        let mut params: Vec<TokenStream> =
            m.params.iter().map(|(_, p, ty)| quote!(#p: impl ::std::convert::Into<#ty>)).collect();
        if let Some((position, p, ty)) = &m.memory_id {
            params.insert((*position).min(params.len()), quote!(#p: impl ::std::convert::Into<#ty>));
        }
        let signature = quote! {
            fn #ident(&self, #(#params),*)
                -> impl ::std::future::Future<Output = ::std::result::Result<#output, #private::AgentError>>
                + ::std::marker::Send
        };
        trait_methods.push(quote! { #(#attrs)* #signature; });
        let converts = m.params.iter().map(|(key, p, ty)| {
            quote! { #private::arg(#key, &{ let #p: #ty = #p.into(); #p }) }
        });
        let field = var(ident);
        let memory_id = match &m.memory_id {
            Some((_, p, ty)) => quote! {
                ::std::option::Option::Some(::std::string::ToString::to_string(&{ let #p: #ty = #p.into(); #p }))
            },
            None => quote!(::std::option::Option::None),
        };
        impl_methods.push(quote! {
            #signature {
                let __inputs = vec![#(#converts),*];
                let __memory_id = #memory_id;
                let __agent = self.#field.clone();
                let __options = self.__options.clone();
                async move { #private::call_with::<#output>(&__agent, __inputs, __memory_id, &__options).await }
            }
        });
    }

    // The builder: one agent per method, in dependency order.
    let mut builds = Vec::new();
    for &i in &order {
        builds.push(build_one(&methods[i], &private, &var, &model_field)?);
    }
    let fields: Vec<Ident> = methods.iter().map(|m| var(&m.ident)).collect();
    let accessors = methods.iter().map(|m| {
        let getter = format_ident!("{}_agent", m.ident);
        let field = var(&m.ident);
        let doc = format!("The agent `{}` (what `{}` invokes), to compose or invoke with options.", m.name, m.ident);
        quote! { #[doc = #doc] #vis fn #getter(&self) -> &#private::AgentRef { &self.#field } }
    });
    let with_model: Vec<&Method> = methods.iter().filter(|m| m.has_model()).collect();
    let model_fields: Vec<Ident> = with_model.iter().map(|m| model_field(&m.ident)).collect();
    let model_setters = with_model.iter().map(|m| {
        let setter = model_field(&m.ident);
        let doc = format!("The chat model of `{}` (default: the builder's model).", m.name);
        quote! {
            #[doc = #doc]
            #vis fn #setter(mut self, model: impl ::std::convert::Into<#private::ChatModelRef>) -> Self {
                self.#setter = ::std::option::Option::Some(model.into());
                self
            }
        }
    });
    let trait_attrs = &item.attrs;
    let unsafety = &item.unsafety;
    let supertraits = if item.supertraits.is_empty() {
        quote!()
    } else {
        let s = &item.supertraits;
        quote!(: #s)
    };
    let agents_doc = format!(
        "The agents of [`{trait_ident}`] (`#[agents]`), built by [`{builder_ident}`]; each method of the trait \
         invokes its agent as one run."
    );
    let builder_doc = format!(
        "Builds [`{agents_ident}`]: every agent asks the builder's model unless given one of its own. \
         `build` fails with a `BuildError` when a template does not compile or two agents declare one key with \
         two types."
    );
    let builder_fn_doc = format!("A builder of [`{agents_ident}`] whose agents ask `model`.");
    let build_doc = format!(
        "Builds the agents of [`{trait_ident}`].\n\n# Errors\nA `BuildError` when a template does not compile or \
         two agents declare one key with two types."
    );
    Ok(quote! {
        #(#trait_attrs)*
        #vis #unsafety trait #trait_ident #supertraits {
            #(#trait_methods)*
        }

        #[doc = #agents_doc]
        #[derive(Clone, Debug)]
        #vis struct #agents_ident {
            #(#fields: #private::AgentRef,)*
            __options: #private::CallOptions,
        }

        #[doc = #builder_doc]
        #vis struct #builder_ident {
            model: #private::ChatModelRef,
            resources: #private::Resources,
            options: #private::CallOptions,
            #(#model_fields: ::std::option::Option<#private::ChatModelRef>,)*
        }

        impl #agents_ident {
            #[doc = #builder_fn_doc]
            #vis fn builder(model: impl ::std::convert::Into<#private::ChatModelRef>) -> #builder_ident {
                #builder_ident {
                    model: model.into(),
                    resources: #private::Resources::new(),
                    options: ::std::default::Default::default(),
                    #(#model_fields: ::std::option::Option::None,)*
                }
            }

            #(#accessors)*
        }

        impl #builder_ident {
            #(#model_setters)*

            /// Gives the `#[resource]` parameters of type `T` of the `#[agent]` functions this trait names as
            /// sub-agents (a ledger, a client): each agent gets a clone. Missing, `build` fails naming it.
            #vis fn resource<T: ::std::clone::Clone + ::std::marker::Send + ::std::marker::Sync + 'static>(
                mut self,
                value: T,
            ) -> Self {
                self.resources.insert(value);
                self
            }

            /// Checkpoints the run of every typed call in `store` (default: none, runs stay in the
            /// process): with a `#[memory_id]` parameter, a suspended call is resumed from there by
            /// `<method>_agent().resume(id)`.
            #vis fn store<S: #private::CheckpointStore>(mut self, store: S) -> Self {
                self.options.set_store(store);
                self
            }

            #[doc = #build_doc]
            #vis fn build(self) -> ::std::result::Result<#agents_ident, #private::BuildError> {
                #[allow(unused_imports)]
                use #private::{CompositeBuilderExt as _, SpecBuilder as _};
                #(#builds)*
                ::std::result::Result::Ok(#agents_ident { #(#fields,)* __options: self.options })
            }
        }

        impl #trait_ident for #agents_ident {
            #(#impl_methods)*
        }
    })
}

/// The order the agents are built in: LLM agents first, then each composite after its sub-agents. Fails on
/// an unknown sub-agent or a cycle, naming the attribute.
fn build_order(trait_ident: &Ident, methods: &[Method]) -> syn::Result<Vec<usize>> {
    let index = |ident: &Ident| methods.iter().position(|m| m.ident == *ident);
    for m in methods {
        for sub in &m.subs {
            if let Sub::Method(ident) = sub
                && index(ident).is_none()
            {
                let known = methods.iter().map(|m| format!("`{}`", m.ident)).collect::<Vec<_>>().join(", ");
                return Err(error(
                    ident.span(),
                    format!(
                        "`#[{}]` on `{}`: unknown sub-agent `{ident}`: the agents of `{trait_ident}` are {known} (an \
                         `#[agent]` function declared elsewhere is named by its path, like `self::{ident}`)",
                        m.kind(),
                        m.ident
                    ),
                ));
            }
        }
    }
    let mut order: Vec<usize> = (0..methods.len()).filter(|&i| methods[i].is_leaf()).collect();
    while order.len() < methods.len() {
        let ready = (0..methods.len()).find(|&i| {
            !order.contains(&i)
                && methods[i].subs.iter().all(|s| match s {
                    Sub::Method(ident) => index(ident).is_some_and(|j| order.contains(&j)),
                    Sub::External(_) => true,
                })
        });
        match ready {
            Some(i) => order.push(i),
            None => {
                let stuck = methods.iter().enumerate().find(|(i, _)| !order.contains(i)).map(|(_, m)| m);
                let m = stuck.unwrap_or(&methods[0]);
                return Err(error(
                    m.ident.span(),
                    format!(
                        "`#[{}]` on `{}`: its sub-agents form a cycle (a composite contains itself)",
                        m.kind(),
                        m.ident
                    ),
                ));
            }
        }
    }
    Ok(order)
}

/// The statement building `m`'s agent into its variable.
fn build_one(
    m: &Method,
    private: &TokenStream,
    var: &dyn Fn(&Ident) -> Ident,
    model_field: &dyn Fn(&Ident) -> Ident,
) -> syn::Result<TokenStream> {
    let target = var(&m.ident);
    let name = &m.name;
    let args = &m.args;
    let description = match args.string("description")? {
        Some(d) => d.value(),
        None => doc_summary(&m.attrs),
    };
    let output = &m.output;
    let call_input = |key: &str, ty: &Type| match option_inner(ty) {
        Some(inner) => quote_spanned!(inner.span()=> let __b = __b.input(#private::call_input::<#inner>(#key, true));),
        None => quote_spanned!(ty.span()=> let __b = __b.input(#private::call_input::<#ty>(#key, false));),
    };
    // `inputs("a", ..)` (LLM agents, humans): exactly these keys activate the agent, typed when a parameter
    // reads them; otherwise every parameter is an input, besides the template's variables.
    let inputs: Vec<TokenStream> = match args.strings("inputs").ok().flatten() {
        Some(listed) if m.is_leaf() => {
            let mut inputs = vec![quote!(let __b = __b.inputs(::std::vec::Vec::<#private::InputSpec>::new());)];
            for key in listed {
                inputs.push(match m.params.iter().find(|(k, _, _)| *k == key.value()) {
                    Some((k, _, ty)) => call_input(k, ty),
                    None => quote!(let __b = __b.input(#private::InputSpec::new(#key));),
                });
            }
            inputs
        }
        _ => m.params.iter().map(|(key, _, ty)| call_input(key, ty)).collect(),
    };
    let output_key = match args.string("output_key")? {
        Some(key) if !is_unit(output) => {
            // `Option<T>`: the key may stay absent; it is declared as `T`.
            let declared = option_inner(output).unwrap_or(output);
            quote_spanned!(output.span()=> let __b = __b.output_key(#private::call_output::<#declared>(#key));)
        }
        Some(key) => quote!(let __b = __b.output_key(#key);),
        None => quote!(),
    };
    let subs: Vec<TokenStream> = m.subs.iter().map(|s| sub_expr(s, var)).collect();
    let model = model_field(&m.ident);
    let model = quote!(self.#model.clone().unwrap_or_else(|| self.model.clone()));
    let head = match m.kind() {
        "human" => {
            let prompt = args.text("prompt")?;
            let response_id = args.string("response_id")?.map(|r| quote!(.response_id(#r)));
            let optional = args.flag("optional")?;
            let returns = quote_spanned!(output.span()=> #private::human_returns::<#output>);
            quote! {
                let __b = #private::human_builder(#name, #prompt)? #response_id;
                let __b = #returns(__b).optional(#optional);
            }
        }
        "bdi" => {
            let mut desires = Vec::new();
            let mut next = 0;
            for desire in args.all("desire") {
                let Meta::List(list) = desire else { continue };
                let inner = Args::parse("bdi", list.span(), list.tokens.clone())?;
                let desire_name = inner.string("name")?;
                let priority = match inner.get_meta("priority") {
                    Some(Meta::NameValue(nv)) => nv.value.clone(),
                    _ => syn::parse_quote!(0),
                };
                let count = inner.paths("agents")?.map_or(0, |p| p.len());
                let agents = &subs[next..next + count];
                next += count;
                let satisfied = match (inner.path("satisfied")?, inner.string("satisfied_key")?) {
                    (Some(f), _) => condition(&f, private),
                    (None, key) => {
                        quote!(move |__v: &#private::ScopeView| ::std::result::Result::Ok(__v.contains(#key)))
                    }
                };
                let achievable = match (inner.path("achievable")?, inner.string("achievable_key")?) {
                    (Some(f), _) => {
                        let f = condition(&f, private);
                        quote!(.achievable(#f))
                    }
                    (None, Some(key)) => {
                        quote!(.achievable(move |__v: &#private::ScopeView| ::std::result::Result::Ok(__v.contains(#key))))
                    }
                    (None, None) => quote!(),
                };
                desires.push(quote! {
                    .desire(#private::Desire::new(#desire_name, #priority, #satisfied, [#(#agents),*]) #achievable)
                });
            }
            let max = args.int("max_invocations")?.map(|n| quote!(.max_invocations(#n)));
            quote!(let __b = #private::Bdi::builder().name(#name) #(#desires)* #max;)
        }
        "decision_router" => {
            let threshold = args.float("threshold")?.map(|t| quote!(.threshold(#t)));
            let retries = args.int("max_retries")?.map(|n| quote!(.max_retries(#n)));
            let request = args.string("request_key")?.map(|k| quote!(.request_key(#k)));
            quote! {
                let __b = #private::DecisionRouter::builder().name(#name).chat_model(#model)
                    .sub_agents([#(#subs),*]) #threshold #retries #request;
            }
        }
        "agent" => {
            let user = args.text("user")?;
            let system = args.text("system")?.map(|s| quote!(.system(#s)));
            let max_tokens = args.int("max_tokens")?.map(|n| quote!(.max_tokens(#n)));
            let temperature = args.float("temperature")?.map(|t| quote!(.temperature(#t)));
            let memory = args.int("memory_window")?.map(|n| quote!(.memory_window(#n)));
            let streaming = args.flag("streaming")?;
            let optional = args.flag("optional")?;
            let returns = quote_spanned!(output.span()=> #private::llm_returns::<#output>);
            quote! {
                let __b = #private::LlmAgent::builder(#model).name(#name) #system .user(#user)
                    #max_tokens #temperature #memory .streaming(#streaming);
                let __b = #returns(__b).optional(#optional);
            }
        }
        "sequence" => quote!(let __b = #private::Sequence::builder().name(#name).sub_agents([#(#subs),*]);),
        "parallel" => {
            let max = args.int("max_concurrency")?.map(|n| quote!(.max_concurrency(#n)));
            quote!(let __b = #private::Parallel::builder().name(#name).sub_agents([#(#subs),*]) #max;)
        }
        "looping" => {
            let max = args.int("max_iterations")?.map(|n| quote!(.max_iterations(#n)));
            let exit = args.path("exit")?.map(|p| quote!(.exit_when(#p)));
            let at_end = args.flag("at_end")?;
            quote! {
                let __b = #private::Loop::builder().name(#name).sub_agents([#(#subs),*]) #max #exit
                    .test_exit_at_loop_end(#at_end);
            }
        }
        "conditional" => {
            let mut branches = Vec::new();
            for branch in args.all("branch") {
                let Meta::List(list) = branch else { continue };
                let inner = Args::parse("conditional", list.span(), list.tokens.clone())?;
                let when = inner.path("when")?;
                let agents = match inner.get_meta("agents") {
                    Some(meta) => paths_of("conditional", "agents", meta)?,
                    None => Vec::new(),
                };
                let agents = agents.into_iter().map(|p| sub_expr(&sub_of(p), var));
                branches.push(quote!(.branch_when(#when, [#(#agents),*])));
            }
            quote!(let __b = #private::Conditional::builder().name(#name) #(#branches)*;)
        }
        "parallel_mapper" => {
            let items = args.string("items_key")?;
            let item = args.string("item_key")?.map(|k| quote!(.item_key(#k)));
            let max = args.int("max_concurrency")?.map(|n| quote!(.max_concurrency(#n)));
            let agent = &subs[0];
            quote! {
                let __b = #private::ParallelMapper::builder().name(#name).sub_agent(#agent).items_key(#items)
                    #item #max;
            }
        }
        "goap" => quote!(let __b = #private::Goap::builder().name(#name).sub_agents([#(#subs),*]);),
        "p2p" => {
            let max = args.int("max_invocations")?.map(|n| quote!(.max_invocations(#n)));
            let exit = args.path("exit")?.map(|p| quote!(.exit_when(#p)));
            quote!(let __b = #private::P2p::builder().name(#name).sub_agents([#(#subs),*]) #max #exit;)
        }
        "blackboard" => {
            let max = args.int("max_invocations")?.map(|n| quote!(.max_invocations(#n)));
            let goal = args.path("goal")?.map(|p| quote!(.goal_when(#p)));
            let mut prefers = Vec::new();
            for prefer in args.all("prefer") {
                let Meta::List(list) = prefer else { continue };
                let inner = Args::parse("blackboard", list.span(), list.tokens.clone())?;
                let (Some(agent), when) = (inner.path("agent")?, inner.path("when")?) else { continue };
                let agent = sub_expr(&sub_of(agent), var);
                prefers.push(match when {
                    Some(f) => {
                        let f = condition(&f, private);
                        quote!(.prefer(#agent.name().to_string(), #f))
                    }
                    None => quote!(.prefer_always(#agent.name().to_string())),
                });
            }
            quote! {
                let __b = #private::Blackboard::builder().name(#name).sub_agents([#(#subs),*]) #max #goal
                    #(#prefers)*;
            }
        }
        "voting" => {
            let strategy = args.string("strategy")?.map(|r| {
                let variant = match r.value().as_str() {
                    "average" => quote!(Average),
                    "highest" => quote!(Highest),
                    _ => quote!(Majority),
                };
                quote!(.strategy(#private::VotingStrategy::#variant))
            });
            let aggregate = args.path("aggregate")?.map(|p| quote!(.aggregate(#p)));
            quote!(let __b = #private::Voting::builder().name(#name).sub_agents([#(#subs),*]) #strategy #aggregate;)
        }
        "debate" => {
            let (judge, debaters) = subs.split_last().map_or((None, &subs[..]), |(j, d)| (Some(j), d));
            let judge = judge.map(|j| quote!(.judge(#j)));
            let rounds = args.int("max_rounds")?.map(|n| quote!(.max_rounds(#n)));
            let converged = args.path("converged")?.map(|p| quote!(.converged_when(#p)));
            quote! {
                let __b = #private::Debate::builder().name(#name).debaters([#(#debaters),*]) #judge #rounds
                    #converged;
            }
        }
        _ => {
            let max = args.int("max_invocations")?.map(|n| quote!(.max_invocations(#n)));
            let retries = args.int("max_retries")?.map(|n| quote!(.max_retries(#n)));
            let response = args.string("response")?.map(|r| {
                let variant = match r.value().as_str() {
                    "summary" => quote!(Summary),
                    "scored" => quote!(Scored),
                    _ => quote!(Last),
                };
                quote!(.response_strategy(#private::ResponseStrategy::#variant))
            });
            let context = args.string("context")?.map(|c| quote!(.supervisor_context(#c)));
            let request = args.string("request_key")?.map(|k| quote!(.request_key(#k)));
            quote! {
                let __b = #private::Supervisor::builder().name(#name).chat_model(#model).sub_agents([#(#subs),*])
                    #max #retries #response #context #request;
            }
        }
    };
    let output_fn = match args.path("output")? {
        Some(path) if !m.is_leaf() => quote!(let __b = __b.output(#path);),
        _ => quote!(),
    };
    let build = if m.kind() == "human" { quote!(#private::human_build(__b)?) } else { quote!(__b.build()?) };
    let description = LitStr::new(&description, Span::call_site());
    Ok(quote! {
        let #target = {
            #head
            let __b = __b.description(#description);
            #(#inputs)*
            #output_key
            #output_fn
            #build
        };
    })
}

/// A condition `f` (a `fn(&ScopeView) -> bool`) as the closure the builders take. `f` is first bound as that
/// function type, so a function of another signature is one error at `f` saying which type was expected.
fn condition(f: &Path, private: &TokenStream) -> TokenStream {
    let typed = quote_spanned!(f.span()=> let __f: fn(&#private::ScopeView) -> bool = #f;);
    quote!({ #typed move |__v: &#private::ScopeView| ::std::result::Result::Ok(__f(__v)) })
}

/// The expression giving a sub-agent's `AgentRef`: the variable of a method's agent, or
/// `<path>_agent_in(&resources)?` (an `#[agent]` function with its `#[resource]` parameters).
fn sub_expr(sub: &Sub, var: &dyn Fn(&Ident) -> Ident) -> TokenStream {
    match sub {
        Sub::Method(ident) => {
            let v = var(ident);
            quote!(#v.clone())
        }
        Sub::External(path) => {
            let mut path = path.clone();
            if let Some(last) = path.segments.last_mut() {
                last.ident = format_ident!("{}_agent_in", last.ident);
            }
            quote!(#path(&self.resources)?)
        }
    }
}
