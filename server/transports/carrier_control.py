"""Call control through the carriers' REST APIs: transfer the live call to people, or hang it up.

Twilio: the `twilio` package's client updates the call (CallSid) with `<Dial>` TwiML, or status `completed`.
Telnyx: Call Control v2 actions `transfer` and `hangup` on the call_control_id.
Vonage: Voice API `PUT /v1/calls/{uuid}` with a `transfer` to a connect NCCO, or `hangup`.
Each API's base URL is a setting (tests point them at a server on loopback). Every failure is a CallControlError
whose message says what to fix; nothing else escapes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
import httpx
from twilio.base.exceptions import TwilioException, TwilioRestException, TwilioServiceException
from twilio.http.async_http_client import AsyncTwilioHttpClient
from twilio.rest import Client
from twilio.twiml.voice_response import VoiceResponse

from pipeline.io import CallControlError
from server.settings import Settings


class CallControl(Protocol):
    """What a carrier transport can do to its live call besides streaming audio."""

    async def transfer(self, target: str) -> None: ...

    async def hang_up(self) -> None: ...


ControlFactory = Callable[[Settings, str | None], CallControl]  # (settings, the stream's call id) -> control


def is_sip(target: str) -> bool:
    return target.lower().startswith(("sip:", "sips:"))


class RestControl:
    """One call on one carrier's REST API. Credentials are checked when an action runs, not when the call starts:
    a call without them still talks, and only a transfer or hang-up fails (with a message naming the variable)."""

    carrier = ""
    credential_vars: tuple[str, ...] = ()  # the TALKLINE_* variables holding the API credentials
    call_id_source = ""  # where the stream carries the call id

    def __init__(self, call_id: str | None, credentials: tuple[str | None, ...], base: str, timeout: float) -> None:
        self.call_id, self.credentials, self.timeout = call_id, credentials, timeout
        self.base = base.rstrip("/")

    def _ready(self, action: str) -> str:
        """The call id, once the action can be attempted at all."""
        if missing := [var for var, value in zip(self.credential_vars, self.credentials, strict=True) if not value]:
            raise CallControlError(f"cannot {action} on {self.carrier}: set {' and '.join(missing)}")
        if not self.call_id:
            raise CallControlError(f"cannot {action} on {self.carrier}: the stream carried no call id ({self.call_id_source})")
        return self.call_id

    def _refused(self, action: str, status: int, detail: str) -> CallControlError:
        credentials = " and ".join(self.credential_vars)
        hint = {
            401: f"check {credentials}",
            403: f"check {credentials} and the account's permissions",
            404: "the call has already ended, or the call id is wrong",
        }.get(status, "")
        message = f"{self.carrier} refused to {action} call {self.call_id}: HTTP {status} {detail.strip()[:300]}"
        return CallControlError(f"{message}; {hint}" if hint else message)

    def _unreachable(self, action: str, error: BaseException) -> CallControlError:
        if isinstance(error, TimeoutError | httpx.TimeoutException):
            return CallControlError(f"{self.carrier} did not answer the {action} request within {self.timeout:g} s ({self.base})")
        return CallControlError(f"could not reach {self.carrier} at {self.base} to {action}: {error!r}")


class BearerControl(RestControl):
    """A JSON REST API with a bearer token (Telnyx, Vonage): one request per action, over httpx."""

    def __init__(self, call_id: str | None, token: str | None, base: str, timeout: float) -> None:
        super().__init__(call_id, (token,), base, timeout)

    async def _request(self, action: str, method: str, path: str, body: dict[str, Any]) -> None:
        """`path` has `{id}` where the (quoted) call id goes."""
        url = self.base + path.format(id=quote(self._ready(action), safe=":"))
        headers = {"Authorization": f"Bearer {self.credentials[0]}", "Accept": "application/json"}
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as http:
                response = await http.request(method, url, json=body, headers=headers)
        except httpx.HTTPError as e:
            raise self._unreachable(action, e) from None
        if response.is_error:
            raise self._refused(action, response.status_code, response.text)


class TelnyxControl(BearerControl):
    carrier = "Telnyx"
    credential_vars = ("TALKLINE_TELNYX_API_KEY",)
    call_id_source = "the start message's call_control_id"

    @classmethod
    def from_settings(cls, settings: Settings, call_id: str | None) -> TelnyxControl:
        return cls(call_id, settings.telnyx_api_key, settings.telnyx_api_base, settings.carrier_api_timeout)

    async def transfer(self, target: str) -> None:
        await self._request("transfer", "POST", "/v2/calls/{id}/actions/transfer", {"to": target})

    async def hang_up(self) -> None:
        await self._request("hang up", "POST", "/v2/calls/{id}/actions/hangup", {})


class VonageControl(BearerControl):
    carrier = "Vonage"
    credential_vars = ("TALKLINE_VONAGE_JWT",)
    call_id_source = "a call_id header of the NCCO's websocket endpoint, or ?call_id= in its uri: the call's uuid"

    @classmethod
    def from_settings(cls, settings: Settings, call_id: str | None) -> VonageControl:
        return cls(call_id, settings.vonage_jwt, settings.vonage_api_base, settings.carrier_api_timeout)

    async def transfer(self, target: str) -> None:
        if is_sip(target):
            endpoint = {"type": "sip", "uri": target}
        else:
            endpoint = {"type": "phone", "number": re.sub(r"\D", "", target)}  # Vonage numbers: digits only, no '+'
        destination = {"type": "ncco", "ncco": [{"action": "connect", "endpoint": [endpoint]}]}
        await self._request("transfer", "PUT", "/v1/calls/{id}", {"action": "transfer", "destination": destination})

    async def hang_up(self) -> None:
        await self._request("hang up", "PUT", "/v1/calls/{id}", {"action": "hangup"})


class TwilioControl(RestControl):
    """Updates the live call with the official client; its API domain's base URL is replaced by the setting."""

    carrier = "Twilio"
    credential_vars = ("TALKLINE_TWILIO_ACCOUNT_SID", "TALKLINE_TWILIO_AUTH_TOKEN")
    call_id_source = "the start message's callSid"

    def __init__(self, call_id: str | None, account_sid: str | None, auth_token: str | None, base: str, timeout: float) -> None:
        super().__init__(call_id, (account_sid, auth_token), base, timeout)

    @classmethod
    def from_settings(cls, settings: Settings, call_id: str | None) -> TwilioControl:
        token, sid = settings.twilio_auth_token, settings.twilio_account_sid
        return cls(call_id, sid, token, settings.twilio_api_base, settings.carrier_api_timeout)

    async def transfer(self, target: str) -> None:
        twiml = VoiceResponse()
        if is_sip(target):
            twiml.dial().sip(target)
        else:
            twiml.dial(target)
        await self._update("transfer", twiml=twiml.to_xml(xml_declaration=False))

    async def hang_up(self) -> None:
        await self._update("hang up", status="completed")

    async def _update(self, action: str, **changes: str) -> None:
        call_sid = self._ready(action)
        account_sid, auth_token = self.credentials
        try:
            async with AsyncTwilioHttpClient() as http:
                client = Client(account_sid, auth_token, http_client=http)
                client.edge = client.region = None  # TWILIO_EDGE / TWILIO_REGION would rewrite the host: the base URL decides
                client.api.base_url = self.base
                async with asyncio.timeout(self.timeout):
                    await client.calls(call_sid).update_async(**changes)
        except TwilioRestException as e:
            raise self._refused(action, e.status, f"{e.msg} (Twilio error {e.code})") from None
        except TwilioServiceException as e:  # the newer problem+json error format
            raise self._refused(action, e.status, f"{e.title}: {e.detail or ''} (Twilio error {e.code})") from None
        except (TimeoutError, aiohttp.ClientError, TwilioException, ValueError) as e:  # ValueError: a body that is not JSON
            raise self._unreachable(action, e) from None
