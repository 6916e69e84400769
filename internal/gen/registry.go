package gen

// The scenarios of kwire's capture set, in the order `kwire-gen -list`
// shows and runs them.
func init() {
	for _, s := range []Scenario{
		groupScenario,
		compressScenario,
		saramaScenario,
		newestScenario,
		altportScenario,
		midstreamScenario,
		lossyScenario,
		pipelineScenario,
	} {
		Register(s)
	}
	RegisterChild("producer", childProducer)
	RegisterChild("member", childMember)
}
