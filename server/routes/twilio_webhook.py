"""POST /twilio/voice: Twilio's incoming-call webhook, answered with TwiML that streams the call to WS /twilio/media."""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, HTTPException, Request, Response
from starlette.datastructures import ImmutableMultiDict
from twilio.request_validator import RequestValidator
from twilio.twiml.voice_response import Connect, VoiceResponse

from server.settings import Settings

log = logging.getLogger(__name__)
router = APIRouter()


def signed_url(request: Request, settings: Settings) -> str:
    """The URL Twilio requested (and signed): the public URL when one is configured, else the request's own."""
    if not settings.public_url:
        return str(request.url)
    query = f"?{request.url.query}" if request.url.query else ""
    return settings.public_url.rstrip("/") + request.url.path + query


def stream_url(request: Request, settings: Settings) -> str:
    """wss://{public host}/twilio/media."""
    if settings.public_url:
        public = urlsplit(settings.public_url)
        return f"wss://{public.netloc}{public.path.rstrip('/')}/twilio/media"
    return f"wss://{request.url.netloc}/twilio/media"


@router.post("/twilio/voice")
async def twilio_voice(request: Request) -> Response:
    """TwiML: connect the call to our media stream, with the profile of the number called."""
    settings: Settings = request.app.state.talkline.settings
    params = ImmutableMultiDict(parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))
    if settings.twilio_auth_token:
        signature = request.headers.get("X-Twilio-Signature", "")
        if not RequestValidator(settings.twilio_auth_token).validate(signed_url(request, settings), params, signature):
            log.warning("POST /twilio/voice: missing or invalid X-Twilio-Signature (call %s)", params.get("CallSid", "?")[:64])
            raise HTTPException(403, "invalid X-Twilio-Signature")
    elif settings.carrier_secret:
        log.warning("POST /twilio/voice refused: TALKLINE_CARRIER_SECRET is set, so the webhook needs TALKLINE_TWILIO_AUTH_TOKEN")
        raise HTTPException(403, "the server does not hand its stream secret to unsigned webhooks")
    if request.app.state.talkline.calls.draining:  # Twilio then tries the number's fallback URL
        raise HTTPException(503, "the server is restarting and takes no new calls", headers={"Retry-After": "5"})
    profile = settings.number_profiles.get(params.get("To", ""), settings.default_profile)
    twiml, connect = VoiceResponse(), Connect()
    stream = connect.stream(url=stream_url(request, settings))
    stream.parameter(name="profile", value=profile)
    if settings.carrier_secret:  # Twilio drops a query string from the stream URL: the secret goes as a <Parameter>
        stream.parameter(name="secret", value=settings.carrier_secret)
    twiml.append(connect)
    return Response(str(twiml), media_type="application/xml")
