//! `#[agents]` on a trait: each method is an agent — an LLM agent (`#[agent(user = .., ..)]`), a human step
//! (`#[human]`) or a composite over the trait's other agents (`#[sequence]`, `#[looping]`, the pattern
//! planners, ...) — and a typed call. Generates `<Trait>Agents` (the agents, implementing the trait) and
//! `<Trait>AgentsBuilder` (the chat models: one for all, or one per agent; resources; the store of the calls).
//!
//! Three steps, one file each: [`method`] reads and checks each method's attribute against its kind's
//! descriptor ([`kinds`]), [`build`] writes the builder calls of one agent, and this file orders the agents and
//! writes the trait, the agents and the builder.

mod build;
mod kinds;
mod method;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{Ident, ItemTrait, TraitItem};

use crate::args::{Args, error};
use build::build_one;
use method::{Method, Sub, read_method};

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
                -> impl ::std::future::Future<Output = ::std::result::Result<#output, #private::Stop>>
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
            models: ::std::vec::Vec<(::std::string::String, #private::ChatModelRef)>,
            resources: #private::Resources,
            options: #private::CallOptions,
            #(#model_fields: ::std::option::Option<#private::ChatModelRef>,)*
        }

        impl #agents_ident {
            #[doc = #builder_fn_doc]
            #vis fn builder(model: impl ::std::convert::Into<#private::ChatModelRef>) -> #builder_ident {
                #builder_ident {
                    model: model.into(),
                    models: ::std::vec::Vec::new(),
                    resources: #private::Resources::new(),
                    options: ::std::default::Default::default(),
                    #(#model_fields: ::std::option::Option::None,)*
                }
            }

            #(#accessors)*
        }

        impl #builder_ident {
            #(#model_setters)*

            /// Gives the builder a model named `name` (a later one of the same name replaces it): the agents
            /// whose `model = "name"` names it ask it, and those with `model = f` may be given it by `f`.
            /// Usage, step records and reports call it `name`.
            #vis fn model(
                mut self,
                name: impl ::std::convert::Into<::std::string::String>,
                model: impl ::std::convert::Into<#private::ChatModelRef>,
            ) -> Self {
                let name = name.into();
                let model = model.into().named(name.clone());
                self.models.retain(|(n, _)| *n != name);
                self.models.push((name, model));
                self
            }

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
                        m.kind.name, m.ident
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
                        m.kind.name, m.ident
                    ),
                ));
            }
        }
    }
    Ok(order)
}
