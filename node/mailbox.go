package node

// mailState is the IFP-8 mailbox (placeholder until implemented).
type mailState struct{}
