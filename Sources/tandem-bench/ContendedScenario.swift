/// `contended`: every client on one room and a few stickers (`--stickers`, default 4
/// when run as `contended`). Each client cycles acquire / update / release over all of
/// them from its own offset, so clients collide: some events are refused with
/// `owned_by_other` or `not_owner`. Every event still gets exactly one receipt.
func makeContendedScenario(options: ScenarioOptions) -> RoomsScenario {
    RoomsScenario(name: "contended", options: options, layout: .contended)
}
