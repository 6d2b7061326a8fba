package model

// NewDefaultRegistry returns a registry with the built-in providers: deepseek-official and
// openai-compatible (configured from the environment now, failing at request time when their
// key is missing) and scripted.
func NewDefaultRegistry() *Registry {
	r := &Registry{}
	r.Register(ProviderDeepSeek, DeepSeekFromEnv())
	r.Register(ProviderOpenAICompatible, OpenAICompatibleFromEnv())
	r.Register(ProviderScripted, NewScripted())
	return r
}
