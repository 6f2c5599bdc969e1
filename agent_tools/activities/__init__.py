"""Every side effect: model providers, tools that touch the world, stores. Each activity is a thin shell
over a plain async function that tests call directly."""
