package decode

import "github.com/twmb/franz-go/pkg/kmsg"

// redactRequest removes secrets from a decoded request, so that no later
// stage can print them: SASL authentication bytes and delegation-token
// HMACs. Their length survives in nothing but the frame size.
func redactRequest(r kmsg.Request) {
	switch r := r.(type) {
	case *kmsg.SASLAuthenticateRequest:
		r.SASLAuthBytes = nil
	case *kmsg.RenewDelegationTokenRequest:
		r.HMAC = nil
	case *kmsg.ExpireDelegationTokenRequest:
		r.HMAC = nil
	}
}

// redactResponse is redactRequest for responses.
func redactResponse(r kmsg.Response) {
	switch r := r.(type) {
	case *kmsg.SASLAuthenticateResponse:
		r.SASLAuthBytes = nil
	case *kmsg.CreateDelegationTokenResponse:
		r.HMAC = nil
	case *kmsg.DescribeDelegationTokenResponse:
		for i := range r.TokenDetails {
			r.TokenDetails[i].HMAC = nil
		}
	}
}
