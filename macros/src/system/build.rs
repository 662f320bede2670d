//! Writing the builder calls of one agent of an `#[agents]` trait: an LLM agent, a human step or a composite
//! over the agents built before it.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, LitStr, Meta, Path, Type};

use super::kinds::Builder;
use super::method::{Method, Sub, is_unit, sub_of};
use crate::args::error;
use crate::args::{Args, paths_of};
use crate::types::{doc_summary, option_inner};

/// The statement building `m`'s agent into its variable.
pub(super) fn build_one(
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
    // `model = "name"`: a model given to the builder by name; `model = f`: chosen per invocation among them.
    let chosen = match args.get_meta("model") {
        None => quote!(self.model.clone()),
        Some(Meta::NameValue(nv)) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(named), .. }) => {
                quote!(#private::named_model(&self.models, #named, #name)?)
            }
            syn::Expr::Path(f) => {
                quote_spanned!(f.span()=> #private::chosen_model(&self.model, &self.models, #f))
            }
            other => {
                return Err(error(
                    other.span(),
                    format!(
                        "`#[{}]`: `model` takes a model's name (`model = \"strong\"`) or a function choosing one \
                         (`model = route`, a `fn(&ScopeView) -> Option<String>`)",
                        m.kind.name
                    ),
                ));
            }
        },
        Some(other) => {
            return Err(error(other.span(), format!("`#[{}]`: `model` takes a value: `model = ..`", m.kind.name)));
        }
    };
    let model = quote!(match self.#model.clone() {
        ::std::option::Option::Some(__m) => __m,
        ::std::option::Option::None => #chosen,
    });
    let head = match m.kind.builder {
        Builder::Human => {
            let prompt = args.text("prompt")?;
            let response_id = args.string("response_id")?.map(|r| quote!(.response_id(#r)));
            let optional = args.flag("optional")?;
            let returns = quote_spanned!(output.span()=> #private::human_returns::<#output>);
            quote! {
                let __b = #private::human_builder(#name, #prompt)? #response_id;
                let __b = #returns(__b).optional(#optional);
            }
        }
        Builder::Bdi => {
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
        Builder::DecisionRouter => {
            let threshold = args.float("threshold")?.map(|t| quote!(.threshold(#t)));
            let retries = args.int("max_retries")?.map(|n| quote!(.max_retries(#n)));
            let request = args.string("request_key")?.map(|k| quote!(.request_key(#k)));
            quote! {
                let __b = #private::DecisionRouter::builder().name(#name).chat_model(#model)
                    .sub_agents([#(#subs),*]) #threshold #retries #request;
            }
        }
        Builder::Llm => {
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
        Builder::Sequence => quote!(let __b = #private::Sequence::builder().name(#name).sub_agents([#(#subs),*]);),
        Builder::Parallel => {
            let max = args.int("max_concurrency")?.map(|n| quote!(.max_concurrency(#n)));
            quote!(let __b = #private::Parallel::builder().name(#name).sub_agents([#(#subs),*]) #max;)
        }
        Builder::Loop => {
            let max = args.int("max_iterations")?.map(|n| quote!(.max_iterations(#n)));
            let exit = args.path("exit")?.map(|p| quote!(.exit_when(#p)));
            let at_end = args.flag("at_end")?;
            quote! {
                let __b = #private::Loop::builder().name(#name).sub_agents([#(#subs),*]) #max #exit
                    .test_exit_at_loop_end(#at_end);
            }
        }
        Builder::Conditional => {
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
        Builder::ParallelMapper => {
            let items = args.string("items_key")?;
            let item = args.string("item_key")?.map(|k| quote!(.item_key(#k)));
            let max = args.int("max_concurrency")?.map(|n| quote!(.max_concurrency(#n)));
            let agent = &subs[0];
            quote! {
                let __b = #private::ParallelMapper::builder().name(#name).sub_agent(#agent).items_key(#items)
                    #item #max;
            }
        }
        Builder::Goap => quote!(let __b = #private::Goap::builder().name(#name).sub_agents([#(#subs),*]);),
        Builder::P2p => {
            let max = args.int("max_invocations")?.map(|n| quote!(.max_invocations(#n)));
            let exit = args.path("exit")?.map(|p| quote!(.exit_when(#p)));
            quote!(let __b = #private::P2p::builder().name(#name).sub_agents([#(#subs),*]) #max #exit;)
        }
        Builder::Blackboard => {
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
        Builder::Voting => {
            let strategy = match args.string("strategy")? {
                Some(r) => {
                    let variant = match r.value().as_str() {
                        "majority" => quote!(Majority),
                        "average" => quote!(Average),
                        "highest" => quote!(Highest),
                        other => return Err(error(r.span(), format!("unknown strategy `{other}`"))),
                    };
                    Some(quote!(.strategy(#private::VotingStrategy::#variant)))
                }
                None => None,
            };
            let aggregate = args.path("aggregate")?.map(|p| quote!(.aggregate(#p)));
            quote!(let __b = #private::Voting::builder().name(#name).sub_agents([#(#subs),*]) #strategy #aggregate;)
        }
        Builder::Debate => {
            let (judge, debaters) = subs.split_last().map_or((None, &subs[..]), |(j, d)| (Some(j), d));
            let judge = judge.map(|j| quote!(.judge(#j)));
            let rounds = args.int("max_rounds")?.map(|n| quote!(.max_rounds(#n)));
            let converged = args.path("converged")?.map(|p| quote!(.converged_when(#p)));
            quote! {
                let __b = #private::Debate::builder().name(#name).debaters([#(#debaters),*]) #judge #rounds
                    #converged;
            }
        }
        Builder::Supervisor => {
            let max = args.int("max_invocations")?.map(|n| quote!(.max_invocations(#n)));
            let retries = args.int("max_retries")?.map(|n| quote!(.max_retries(#n)));
            let response = match args.string("response")? {
                Some(r) => {
                    let variant = match r.value().as_str() {
                        "last" => quote!(Last),
                        "summary" => quote!(Summary),
                        "scored" => quote!(Scored),
                        other => return Err(error(r.span(), format!("unknown response `{other}`"))),
                    };
                    Some(quote!(.response_strategy(#private::ResponseStrategy::#variant)))
                }
                None => None,
            };
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
    let build =
        if m.kind.builder == Builder::Human { quote!(#private::human_build(__b)?) } else { quote!(__b.build()?) };
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
