package egress

import "strings"

// price is a model's list price, in US dollars per million tokens.
type price struct{ in, out float64 }

// Anthropic bills cache reads at a tenth of the input price and cache writes at 1.25 times.
const (
	cacheReadFactor  = 0.1
	cacheWriteFactor = 1.25
)

// prices are list prices by route and a part of the model's name, first match wins (so
// "gpt-5-mini" before "gpt-5"). A model that matches none costs its route's dearest, so that a
// budget errs on stopping early rather than on spending more than it says.
var prices = []struct {
	route, name string
	p           price
}{
	{"anthropic", "opus", price{15, 75}},
	{"anthropic", "sonnet", price{3, 15}},
	{"anthropic", "haiku", price{1, 5}},
	{"openai", "gpt-5-nano", price{0.05, 0.4}},
	{"openai", "gpt-5-mini", price{0.25, 2}},
	{"openai", "gpt-5", price{1.25, 10}},
	{"openai", "gpt-4.1-nano", price{0.1, 0.4}},
	{"openai", "gpt-4.1-mini", price{0.4, 1.6}},
	{"openai", "gpt-4.1", price{2, 8}},
	{"openai", "gpt-4o-mini", price{0.15, 0.6}},
	{"openai", "gpt-4o", price{2.5, 10}},
	{"openai", "o4-mini", price{1.1, 4.4}},
	{"openai", "o3", price{2, 8}},
	{"openai", "codex-mini", price{1.5, 6}},
}

// dearest is what an unknown model of a route costs.
var dearest = map[string]price{"anthropic": {15, 75}, "openai": {15, 60}}

// priceOf is the price of model on route.
func priceOf(route, model string) price {
	model = strings.ToLower(model)
	for _, e := range prices {
		if e.route == route && strings.Contains(model, e.name) {
			return e.p
		}
	}
	if p, ok := dearest[route]; ok {
		return p
	}
	return price{15, 75}
}

// cost is what one response's tokens cost at p.
func (p price) cost(t tokens) float64 {
	in := float64(t.input) + cacheWriteFactor*float64(t.cacheWrite) + cacheReadFactor*float64(t.cacheRead)
	return (in*p.in + float64(t.output)*p.out) / 1e6
}
