package api

import (
	"context"
	"net/http"
	"net/url"
)

// Token is a user's bearer token for a fleet's API nodes
// (`loopctl token`). Secret is the token itself, sent once, in the answer
// that created it: the API node keeps only its SHA-256.
type Token struct {
	ID        string `json:"id"` // the first 12 hex digits of its SHA-256
	Name      string `json:"name"`
	CreatedAt Time   `json:"created_at"`
	RevokedAt *Time  `json:"revoked_at"`
	Secret    string `json:"token,omitempty"`
}

// TokenRequest asks for a new token for the user Name.
type TokenRequest struct {
	Name string `json:"name"`
}

// CreateToken makes a token for name; the answer carries the secret.
func (c *Client) CreateToken(ctx context.Context, name string) (Token, error) {
	var tok Token
	err := c.do(ctx, http.MethodPost, "/v1/tokens", nil, TokenRequest{Name: name}, &tok)
	return tok, err
}

// Tokens lists the tokens, in use and revoked, without their secrets.
func (c *Client) Tokens(ctx context.Context) ([]Token, error) {
	var toks []Token
	err := c.do(ctx, http.MethodGet, "/v1/tokens", nil, nil, &toks)
	return toks, err
}

// RevokeToken revokes name's token in use.
func (c *Client) RevokeToken(ctx context.Context, name string) (Token, error) {
	var tok Token
	err := c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(name), nil, nil, &tok)
	return tok, err
}
